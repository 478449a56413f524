//go:build !unix

package pgbuckets_test

import "time"

// processCPU is not measured here: the CPU figures read zero.
func processCPU() time.Duration { return 0 }
