//go:build amd64 && !purego

package blake3batch

// lanePaths are the lane widths this CPU can run, widest first, with 0 for
// one message at a time.
func lanePaths() []int {
	var widths []int
	for _, w := range []int{16, 8} {
		if w <= laneWidth {
			widths = append(widths, w)
		}
	}
	return append(widths, 0)
}

// useLaneWidth hashes width messages per compression until the returned
// function runs.
func useLaneWidth(width int) (restore func()) {
	saved := laneWidth
	laneWidth = width
	return func() { laneWidth = saved }
}

func lanePathAvailable() bool { return laneWidth > 0 }
