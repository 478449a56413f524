//go:build unix

package pgbuckets_test

import (
	"syscall"
	"time"
)

// processCPU is the CPU time (user and system, all threads) the process
// has used so far. On a shared machine it measures a run's work better
// than the wall clock does.
func processCPU() time.Duration {
	var u syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &u); err != nil {
		return 0
	}
	return time.Duration(u.Utime.Nano() + u.Stime.Nano())
}
