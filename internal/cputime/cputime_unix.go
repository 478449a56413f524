//go:build unix

// Package cputime reads the CPU time the process has used, for benchmarks
// and load tests: on a shared machine it measures a run's work better than
// the wall clock does.
package cputime

import (
	"syscall"
	"time"
)

// Process is the CPU time (user and system, all threads) the process has
// used so far; 0 when it cannot be read.
func Process() time.Duration {
	var u syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &u); err != nil {
		return 0
	}
	return time.Duration(u.Utime.Nano() + u.Stime.Nano())
}
