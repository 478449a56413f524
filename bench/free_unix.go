//go:build linux || darwin

package main

import "golang.org/x/sys/unix"

// freeBytes is the space of dir's file system available to this user.
func freeBytes(dir string) (int64, bool) {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return 0, false
	}
	return int64(st.Bavail) * int64(st.Bsize), true
}
