//go:build unix

package bolt

import (
	"os"
	"syscall"

	"golang.org/x/sys/unix"
)

// lockedByAnother reports whether a process holds a lock on the file (bbolt
// takes one on every file it opens), or whether that cannot be found out.
func lockedByAnother(name string) bool {
	f, err := os.Open(name)
	if err != nil {
		return true
	}
	defer f.Close()
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		return true
	}
	unix.Flock(int(f.Fd()), unix.LOCK_UN)
	return false
}

// linkCount returns the number of hard links of the file at path, 0 when
// unknown.
func linkCount(path string) uint64 {
	info, err := os.Stat(path)
	if err != nil {
		return 0
	}
	if st, ok := info.Sys().(*syscall.Stat_t); ok {
		return uint64(st.Nlink)
	}
	return 0
}
