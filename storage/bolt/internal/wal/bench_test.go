package wal

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

// BenchmarkAppend measures one durable Append of 300 B, 20 KB and 400 KB
// records beside its baseline in the same run, alternating: the same bytes
// (header, payload and padding) written with one write and one fdatasync to
// a preallocated file. Every 64 appends the log is released as a checkpoint
// would, outside the timed part, so rotations take recycled spares.
// ns/op covers both; the metrics wal-ns/op and raw-ns/op split them, and
// wal/raw and p50-wal/raw are the ratios.
func BenchmarkAppend(b *testing.B) {
	for _, sizeBytes := range []int{300, 20_000, 400_000} {
		b.Run(fmt.Sprintf("%dB", sizeBytes), func(b *testing.B) {
			benchmarkAppend(b, sizeBytes)
		})
	}
}

func benchmarkAppend(b *testing.B, sizeBytes int) {
	dir := b.TempDir()
	l, err := Open(filepath.Join(dir, "wal"), Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	rawPath := filepath.Join(dir, "raw")
	if err := createZeroed(rawPath, SegmentSizeDefault, nil); err != nil {
		b.Fatal(err)
	}
	raw, err := os.OpenFile(rawPath, os.O_RDWR, 0)
	if err != nil {
		b.Fatal(err)
	}
	defer raw.Close()
	payload := payloadFor(1, sizeBytes)
	rawRecord := make([]byte, recordSizeBytes(sizeBytes))
	encodeHeader(rawRecord, 1, payload)
	copy(rawRecord[RecordHeaderSizeBytes:], payload)
	waitSpares(b, l, 1)

	walDurations := make([]time.Duration, 0, b.N)
	rawDurations := make([]time.Duration, 0, b.N)
	rawOffset := int64(0)
	b.SetBytes(int64(sizeBytes))
	b.ResetTimer()
	for lsn := uint64(1); lsn <= uint64(b.N); lsn++ {
		start := time.Now()
		if err := l.Append(lsn, payload); err != nil {
			b.Fatal(err)
		}
		appended := time.Now()
		if rawOffset+int64(len(rawRecord)) > SegmentSizeDefault {
			rawOffset = 0
		}
		if _, err := raw.WriteAt(rawRecord, rawOffset); err != nil {
			b.Fatal(err)
		}
		if err := syncData(raw); err != nil {
			b.Fatal(err)
		}
		rawOffset += int64(len(rawRecord))
		walDurations = append(walDurations, appended.Sub(start))
		rawDurations = append(rawDurations, time.Since(appended))
		if lsn%64 == 0 {
			b.StopTimer()
			if err := l.Release(lsn - 1); err != nil {
				b.Fatal(err)
			}
			b.StartTimer()
		}
	}
	b.StopTimer()
	walMean, rawMean := mean(walDurations), mean(rawDurations)
	walMedian, rawMedian := median(walDurations), median(rawDurations)
	b.ReportMetric(walMean, "wal-ns/op")
	b.ReportMetric(rawMean, "raw-ns/op")
	b.ReportMetric(walMean/rawMean, "wal/raw")
	b.ReportMetric(walMedian, "p50-wal-ns")
	b.ReportMetric(rawMedian, "p50-raw-ns")
	b.ReportMetric(walMedian/rawMedian, "p50-wal/raw")
}

func mean(durations []time.Duration) float64 {
	var total time.Duration
	for _, d := range durations {
		total += d
	}
	return float64(total.Nanoseconds()) / float64(len(durations))
}

func median(durations []time.Duration) float64 {
	sorted := slices.Clone(durations)
	slices.Sort(sorted)
	return float64(sorted[len(sorted)/2].Nanoseconds())
}
