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
// and sizeBytes, and syncs it when it wrote anything. A writable Open does
// it behind the end of the log: bytes there are a torn record or records a
// crash kept although an earlier one was lost (records written without a
// sync can reach the disk out of order). Left in place, one of them could
// continue the log again once the next Append has rewritten the place of
// the lost one with a record of the same length, and come back at the next
// Open although it was never acknowledged.
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
