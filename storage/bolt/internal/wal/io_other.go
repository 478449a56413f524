//go:build !linux

package wal

import "os"

// writeAt writes the buffers one after the other at offset.
func writeAt(f *os.File, offset int64, buffers [][]byte) error {
	for _, buffer := range buffers {
		if _, err := f.WriteAt(buffer, offset); err != nil {
			return err
		}
		offset += int64(len(buffer))
	}
	return nil
}

// syncData flushes the file (fsync where fdatasync is not available).
func syncData(f *os.File) error {
	return f.Sync()
}
