//go:build !amd64 || purego

package blake3batch

// lanePaths is one message at a time only: this build has no lane path.
func lanePaths() []int { return []int{0} }

func useLaneWidth(int) (restore func()) { return func() {} }

func lanePathAvailable() bool { return false }
