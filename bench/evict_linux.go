package main

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// evict drops the file's pages from the page cache, so that the next read
// comes from the disk. The file must have been closed cleanly (its pages
// are clean).
func evict(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := f.Sync(); err != nil {
		return err
	}
	if err := unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED); err != nil {
		return fmt.Errorf("evict %s: %w", path, err)
	}
	return nil
}
