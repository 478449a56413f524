//go:build linux

package main

import "golang.org/x/sys/unix"

// memoryBytes is the machine's physical memory.
func memoryBytes() (int64, bool) {
	var si unix.Sysinfo_t
	if err := unix.Sysinfo(&si); err != nil {
		return 0, false
	}
	return int64(si.Totalram) * int64(si.Unit), true
}
