package chain

// GroupsMergedMax is groupsMergedMax, for the pipeline tests.
const GroupsMergedMax = groupsMergedMax

// LowerHashAheadPartMin makes AppendBatch hash parts of n requests or more
// ahead (see hashAhead) until restore is called.
func LowerHashAheadPartMin(n int) (restore func()) {
	old := hashAheadPartMin
	hashAheadPartMin = n
	return func() { hashAheadPartMin = old }
}

// QueueLen is the number of requests waiting for the committer.
func QueueLen(db *DB) int { return len(db.queue) }
