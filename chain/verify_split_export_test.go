package chain

// SetVerifyChunkEntries makes Verify read every chain of more than n
// entries in chunks of n; a huge n keeps every chain whole. It returns the
// function that restores the chunk size.
func SetVerifyChunkEntries(n uint64) (restore func()) {
	old := verifyChunkEntries.Swap(n)
	return func() { verifyChunkEntries.Store(old) }
}

// VerifyChunking is the entries per chunk and the number of chunks of a
// chain whose stored head is at headSeq.
func VerifyChunking(headSeq uint64) (size, count uint64) { return verifyChunking(headSeq) }

// VerifySplitChains counts the chains verified in chunks since the process
// began.
func VerifySplitChains() int64 { return verifySplitChains.Load() }

// VerifyIndexAheadChains counts the chains whose key index was summed on
// a goroutine of its own while their entries were read.
func VerifyIndexAheadChains() int64 { return verifyIndexAheadChains.Load() }
