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

// LowerTreeHelperLimits makes a group of appendsMin Appends start a tree
// helper that takes at most itemsMax appends, until restore is called.
func LowerTreeHelperLimits(appendsMin, itemsMax int) (restore func()) {
	oldMin, oldMax := treeHelperAppendsMin, treeHelperItemsMax
	treeHelperAppendsMin, treeHelperItemsMax = appendsMin, itemsMax
	return func() { treeHelperAppendsMin, treeHelperItemsMax = oldMin, oldMax }
}
