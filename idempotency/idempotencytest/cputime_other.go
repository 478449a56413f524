//go:build !unix

package idempotencytest

import "time"

// processCPU is not measured here: RunClients then reports no CPU figure.
func processCPU() time.Duration { return 0 }
