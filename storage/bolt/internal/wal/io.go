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
