package wal

import "os"

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
