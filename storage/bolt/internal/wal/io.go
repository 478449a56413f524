package wal

import (
	"bytes"
	"os"
)

// advance drops the first written bytes of buffers.
func advance(buffers [][]byte, written int) [][]byte {
	for len(buffers) > 0 && written >= len(buffers[0]) {
		written -= len(buffers[0])
		buffers = buffers[1:]
	}
	if len(buffers) > 0 {
		buffers[0] = buffers[0][written:]
	}
	return buffers
}

// syncDirectory makes the creations, renames and removals in dir durable.
func syncDirectory(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	if err := d.Sync(); err != nil {
		d.Close()
		return err
	}
	return d.Close()
}

// zeroTailChunkBytes is how much zeroTail reads and writes at a time.
const zeroTailChunkBytes = 64 << 10

// zeroTail overwrites with zeros whatever is not zero in f between offset
// and sizeBytes, and syncs it when it wrote anything (see Log.clearTail).
func zeroTail(f *os.File, offset, sizeBytes int64) error {
	chunk := make([]byte, zeroTailChunkBytes)
	zeros := make([]byte, zeroTailChunkBytes)
	wrote := false
	for at := offset; at < sizeBytes; at += zeroTailChunkBytes {
		n := int(min(zeroTailChunkBytes, sizeBytes-at))
		if _, err := f.ReadAt(chunk[:n], at); err != nil {
			return err
		}
		if bytes.Equal(chunk[:n], zeros[:n]) {
			continue
		}
		if err := writeAt(f, at, [][]byte{zeros[:n]}); err != nil {
			return err
		}
		wrote = true
	}
	if wrote {
		return syncData(f)
	}
	return nil
}

// pendingGap is a place in a list of queued buffers where the file skips
// bytes (written ahead): the buffers from index on go at offset.
type pendingGap struct {
	index  int
	offset int64
}

// writeRuns writes buffers at from, one run of contiguous buffers at a
// time: each gap starts a new run at its offset.
func writeRuns(f *os.File, from int64, buffers [][]byte, gaps []pendingGap) error {
	start := 0
	for _, gap := range gaps {
		if err := writeAt(f, from, buffers[start:gap.index]); err != nil {
			return err
		}
		start, from = gap.index, gap.offset
	}
	return writeAt(f, from, buffers[start:])
}
