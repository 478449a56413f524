package chain

// GroupsMergedMax is groupsMergedMax, for the pipeline tests.
const GroupsMergedMax = groupsMergedMax
