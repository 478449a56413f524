//go:build linux

package wal

import (
	"os"

	"golang.org/x/sys/unix"
)

// iovecsMax is the most buffers one pwritev takes (IOV_MAX).
const iovecsMax = 1024

// writeAt writes buffers (records' headers, payloads and padding) at
// offset in one system call (pwritev) per iovecsMax buffers, continuing
// after a short write.
func writeAt(f *os.File, offset int64, buffers [][]byte) error {
	fd := int(f.Fd())
	for len(buffers) > 0 {
		written, err := unix.Pwritev(fd, buffers[:min(len(buffers), iovecsMax)], offset)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return &os.PathError{Op: "pwritev", Path: f.Name(), Err: err}
		}
		offset += int64(written)
		buffers = advance(buffers, written)
		if written == 0 && len(buffers) > 0 {
			return &os.PathError{Op: "pwritev", Path: f.Name(), Err: unix.EIO}
		}
	}
	return nil
}

// syncData flushes the file's data and the metadata needed to read it back
// (fdatasync): the file size does not change on append, so no inode flush.
func syncData(f *os.File) error {
	for {
		err := unix.Fdatasync(int(f.Fd()))
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return &os.PathError{Op: "fdatasync", Path: f.Name(), Err: err}
		}
		return nil
	}
}
