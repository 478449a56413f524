// Package mapscan keeps a long scan of a bbolt file's memory map (a
// verify, an export) from growing the process's resident size with the
// file: a Scan, told of each value the scan reads (Observe), reads ahead of
// it with MADV_WILLNEED and drops the pages it has passed every few MiB
// (they stay in the page cache). Where the map cannot be advised (every
// system but Linux) a Scan does nothing.
package mapscan
