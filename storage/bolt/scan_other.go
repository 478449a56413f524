//go:build !linux

package bolt

// scanMemory does nothing where the map cannot be advised.
type scanMemory struct{}

func (s *scanMemory) observe(v []byte) {}
