//go:build !amd64

package prefetch

// Line does nothing on this architecture: its loads are not asked for
// ahead of need.
func Line(p *byte) {}
