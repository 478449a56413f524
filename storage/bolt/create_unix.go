//go:build unix

package bolt

import (
	"os"

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
