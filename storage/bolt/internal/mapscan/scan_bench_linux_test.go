//go:build linux

package mapscan

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

// A scan's releases cost the same in a small map and in a large one: the
// scan reads 64 MiB of a map of 1 GiB (the baseline) and of 64 GiB (a
// ledger of about 170,000,000 entries), both files sparse. Before the
// clock starts a page of every 2 MiB of the map is read, as a scan of the
// whole file leaves the map's page tables, and one scan runs untimed.
// Compare the two ns/op: a release of the whole map walks the page tables
// of all of it.
func BenchmarkScanRelease(b *testing.B) {
	const (
		value = 16 << 10
		read  = 64 << 20
	)
	for _, size := range []int64{1 << 30, 64 << 30} {
		b.Run(fmt.Sprintf("map=%dGiB", size>>30), func(b *testing.B) {
			f, err := os.Create(filepath.Join(b.TempDir(), "scan"))
			if err != nil {
				b.Fatal(err)
			}
			defer f.Close()
			if err := f.Truncate(size); err != nil {
				b.Skipf("a sparse file of %d bytes: %v", size, err)
			}
			m, err := unix.Mmap(int(f.Fd()), 0, int(size), unix.PROT_READ, unix.MAP_SHARED)
			if err != nil {
				b.Skipf("a map of %d bytes: %v", size, err)
			}
			defer unix.Munmap(m)
			// As bbolt maps a file: a fault reads its page, not a window.
			if err := unix.Madvise(m, unix.MADV_RANDOM); err != nil {
				b.Fatal(err)
			}
			forgetMaps := func() {
				scanMaps.Lock()
				scanMaps.ranges, scanMaps.advised, scanMaps.begun = nil, nil, [2]uintptr{}
				scanMaps.Unlock()
			}
			forgetMaps()
			b.Cleanup(forgetMaps)
			var sum byte
			for at := 0; at < len(m); at += 2 << 20 {
				sum += m[at]
			}
			from := int(size/2) &^ (scanAdviceBytes - 1)
			scan := func() {
				var s Scan
				for at := from; at < from+read; at += value {
					for p := at; p < at+value; p += os.Getpagesize() {
						sum += m[p] // the caller reads what the scan observes
					}
					s.Observe(m[at : at+value])
				}
			}
			// Untimed: the first release of the whole map drops the
			// pages read above, and the scan's pages enter the cache.
			scan()
			b.SetBytes(read)
			b.ResetTimer()
			for range b.N {
				scan()
			}
			b.StopTimer()
			benchSink = sum
		})
	}
}

var benchSink byte
