package wal

import (
	"errors"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
)

const (
	// SparesDefault is Options.Spares when zero: how many segment files,
	// zero-filled or recycled after Release, are kept ready for the next
	// rotations.
	SparesDefault = 2
	// SparesMax bounds Options.Spares.
	SparesMax = 64
)

// errClosing ends a spare's preparation when the log closes.
var errClosing = errors.New("wal: closing")

// spares is the pool of files ready to become the next segment: each is
// sizeBytes long and fully allocated, so a rotation is a rename and a
// directory sync instead of writing a whole segment of zeros. One goroutine
// at a time fills a new one when the pool is empty.
type spares struct {
	dir       string
	sizeBytes int64
	max       int // Options.Spares or its default
	stop      atomic.Bool

	mu        sync.Mutex
	ready     []string      // paths, each sizeBytes long
	preparing chan struct{} // closed when the running preparation ends; nil when none runs
	number    uint64        // the next spare or temporary file number
}

// take returns the path of a spare, waiting for the running preparation or
// preparing one in the calling goroutine when none is ready.
func (s *spares) take() (string, error) {
	for {
		s.mu.Lock()
		if n := len(s.ready); n > 0 {
			path := s.ready[n-1]
			s.ready = s.ready[:n-1]
			s.mu.Unlock()
			return path, nil
		}
		if s.preparing != nil {
			done := s.preparing
			s.mu.Unlock()
			<-done
			s.mu.Lock()
			empty := len(s.ready) == 0
			s.mu.Unlock()
			if empty {
				// The preparation failed: try once more here and report.
				return s.prepare(nil)
			}
			continue
		}
		s.mu.Unlock()
		return s.prepare(nil)
	}
}

// prepare creates a zero-filled spare and returns its path.
func (s *spares) prepare(stop *atomic.Bool) (string, error) {
	s.mu.Lock()
	number := s.number
	s.number++
	s.mu.Unlock()
	temp := filepath.Join(s.dir, tempName(number))
	if err := createZeroed(temp, s.sizeBytes, stop, nil); err != nil {
		return "", err
	}
	path := filepath.Join(s.dir, spareName(number))
	if err := os.Rename(temp, path); err != nil {
		os.Remove(temp)
		return "", err
	}
	return path, nil
}

// refill starts a background preparation when no spare is ready and none
// is being prepared.
func (s *spares) refill() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.ready) > 0 || s.preparing != nil || s.stop.Load() {
		return
	}
	done := make(chan struct{})
	s.preparing = done
	go func() {
		path, err := s.prepare(&s.stop)
		s.mu.Lock()
		if err == nil {
			// A failed preparation is not reported here: the rotation
			// that finds no spare prepares one itself and returns its error.
			s.ready = append(s.ready, path)
		}
		s.preparing = nil
		close(done)
		s.mu.Unlock()
	}()
}

// recycle offers the released segment at path as a spare; it returns false
// when the pool is full or the file has another size, and the caller then
// removes the file.
func (s *spares) recycle(path string, sizeBytes int64) (bool, error) {
	s.mu.Lock()
	if len(s.ready) >= s.max || sizeBytes != s.sizeBytes || s.stop.Load() {
		s.mu.Unlock()
		return false, nil
	}
	number := s.number
	s.number++
	s.mu.Unlock()
	spare := filepath.Join(s.dir, spareName(number))
	if err := os.Rename(path, spare); err != nil {
		return false, err
	}
	s.mu.Lock()
	s.ready = append(s.ready, spare)
	s.mu.Unlock()
	return true, nil
}

// close stops and waits for a running preparation.
func (s *spares) close() {
	s.stop.Store(true)
	s.mu.Lock()
	done := s.preparing
	s.mu.Unlock()
	if done != nil {
		<-done
	}
}

// nextNumber reserves a file number for a temporary file.
func (s *spares) nextNumber() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	number := s.number
	s.number++
	return number
}
