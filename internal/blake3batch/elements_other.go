//go:build !amd64 || purego

package blake3batch

// elementLanes has no lane path in this build.
type elementLanes struct{}

func (l *elementLanes) setKey(*[KeySize]byte) {}

func (l *elementLanes) elements(*Elements, int) bool { return false }

func (l *elementLanes) keyDigests(*Elements, []byte, []uint8, []uint64) bool { return false }
