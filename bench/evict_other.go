//go:build !linux

package main

import "fmt"

func evict(path string) error {
	return fmt.Errorf("evict %s: %w", path, errEvictUnsupported)
}
