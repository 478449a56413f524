//go:build !amd64 || purego

package blake3batch

// forceOneAtATime is a no-op: this build has only the one-at-a-time path.
func forceOneAtATime() (restore func()) { return func() {} }

func lanePathAvailable() bool { return false }
