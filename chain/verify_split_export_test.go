package chain

// SetVerifyPartEntriesMin makes Verify split every chain of at least 2*n
// entries into parts (one per CPU); a huge n keeps every chain whole. It
// returns the function that restores the threshold.
func SetVerifyPartEntriesMin(n uint64) (restore func()) {
	old := verifyPartEntriesMin.Swap(n)
	return func() { verifyPartEntriesMin.Store(old) }
}

// VerifyPartStarts is the first seq of each part of a chain whose stored
// head is at headSeq, verified with procs CPUs; nil when it is read whole.
func VerifyPartStarts(headSeq uint64, procs int) []uint64 { return verifyPartStarts(headSeq, procs) }

// VerifySplitChains counts the chains verified in parts since the process
// began.
func VerifySplitChains() int64 { return verifySplitChains.Load() }
