//go:build amd64 && !purego

package blake3batch

// forceOneAtATime disables the lane path until the returned function runs.
func forceOneAtATime() (restore func()) {
	saved := useLanes
	useLanes = false
	return func() { useLanes = saved }
}

func lanePathAvailable() bool { return useLanes }
