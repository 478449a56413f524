// Package mapscan keeps a long scan of a bbolt file's memory map (a
// verify, an export) from growing the process's resident size with the
// file: a Scan, told of each value the scan reads (Observe), reads ahead of
// it with MADV_WILLNEED and, every few MiB, drops the pages of the values
// it has read since the last time (they stay in the page cache). The
// whole map is dropped only every few tens of MiB the process's scans
// read, for the pages no scan observed (bbolt's branch pages): the
// kernel's cost of dropping a range grows with the range, so a release of
// the whole map at every step made a verify's CPU an entry grow with the
// file. Where the map cannot be advised (every system but Linux) a Scan
// does nothing.
package mapscan
