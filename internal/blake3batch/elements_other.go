//go:build !amd64 || purego

package blake3batch

// elementLanes has no lane path in this build: wide is false, and Elements
// takes the whole-message path.
type elementLanes struct{}

func (l *elementLanes) setKey(*[KeySize]byte) {}

func (l *elementLanes) wide() bool { return false }

func (l *elementLanes) elements(*Elements, int) { panic("blake3batch: no lane path") }

func (l *elementLanes) keyDigests(*Elements, []byte, []uint8, []uint64) {
	panic("blake3batch: no lane path")
}
