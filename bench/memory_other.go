//go:build !linux

package main

// memoryBytes is not known here: every file is taken to fit in memory.
func memoryBytes() (int64, bool) { return 0, false }
