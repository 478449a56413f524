package prefetch

// Line asks for the cache line that holds *p to be loaded into every level
// of the cache (PREFETCHT0) and returns without waiting for it. It never
// faults: a line that cannot be loaded is not.
//
//go:noescape
func Line(p *byte)
