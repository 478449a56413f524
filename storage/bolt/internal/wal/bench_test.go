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
// records beside its baseline in the same run, interleaved: the same bytes
// (header, payload and padding) written with one write and one fdatasync to
// a preallocated file. Every 64 appends the log is released as a checkpoint
// would, outside the timed part, so rotations take recycled spares (the
// steady state, reached before the timer starts).
// ns/op covers both; the metrics wal-ns/op and raw-ns/op split them, and
// wal/raw and p50-wal/raw are the ratios; crc-ns is what the record's
// CRC-32C alone takes, which the baseline does not compute.
// The identity variants append to a log with an identity (segment headers
// and seals, the bolt backend's), the others to one without.
func BenchmarkAppend(b *testing.B) {
	for _, sizeBytes := range []int{300, 20_000, 400_000} {
		for _, identity := range []bool{false, true} {
			name := fmt.Sprintf("%dB", sizeBytes)
			if identity {
				name = "identity/" + name
			}
			b.Run(name, func(b *testing.B) {
				benchmarkAppend(b, sizeBytes, identity)
			})
		}
	}
}

func benchmarkAppend(b *testing.B, sizeBytes int, identity bool) {
	dir := b.TempDir()
	opts := Options{}
	if identity {
		opts = Options{ID: ID{1}, Create: true, FirstLSN: 1}
	}
	l, err := Open(filepath.Join(dir, "wal"), opts)
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	rawPath := filepath.Join(dir, "raw")
	if err := createZeroed(rawPath, SegmentSizeDefault, nil, nil); err != nil {
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
	// Reach the steady state before timing: segments grow to the full
	// size, the first rotations at that size fill spares with zeros in the
	// background; later ones take segments recycled by Release.
	lsn := uint64(1)
	for fullSize := 0; fullSize < 3; {
		if segments := segmentsOf(l); len(segments) > 0 && segments[len(segments)-1].sizeBytes == SegmentSizeDefault {
			fullSize++
		}
		if err := l.Append(lsn, payload); err != nil {
			b.Fatal(err)
		}
		l.Rotate()
		if err := l.Release(lsn); err != nil {
			b.Fatal(err)
		}
		lsn++
	}
	waitSpares(b, l, SparesDefault)
	firstLSN := lsn
	checksum := checksumDuration(rawRecord, payload)

	walDurations := make([]time.Duration, 0, b.N)
	rawDurations := make([]time.Duration, 0, b.N)
	rawOffset := int64(0)
	b.SetBytes(int64(sizeBytes))
	b.ResetTimer()
	appendRaw := func() {
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
	}
	for ; lsn < firstLSN+uint64(b.N); lsn++ {
		// The two alternate which goes first, so that neither always
		// follows the other's sync.
		if lsn%2 == 0 {
			start := time.Now()
			appendRaw()
			rawDurations = append(rawDurations, time.Since(start))
		}
		start := time.Now()
		if err := l.Append(lsn, payload); err != nil {
			b.Fatal(err)
		}
		walDurations = append(walDurations, time.Since(start))
		if lsn%2 == 1 {
			start := time.Now()
			appendRaw()
			rawDurations = append(rawDurations, time.Since(start))
		}
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
	b.ReportMetric(walMean.Seconds()*1e9, "wal-ns/op")
	b.ReportMetric(rawMean.Seconds()*1e9, "raw-ns/op")
	b.ReportMetric(walMean.Seconds()/rawMean.Seconds(), "wal/raw")
	b.ReportMetric(walMedian.Seconds()*1e9, "p50-wal-ns")
	b.ReportMetric(rawMedian.Seconds()*1e9, "p50-raw-ns")
	b.ReportMetric(walMedian.Seconds()/rawMedian.Seconds(), "p50-wal/raw")
	b.ReportMetric(checksum.Seconds()*1e9, "crc-ns")
}

// checksumDuration is the median time of the record's CRC-32C, the part of
// an Append that the baseline does not do: it shows how much of the
// difference is the format's own cost.
func checksumDuration(header []byte, payload []byte) time.Duration {
	const rounds = 65
	durations := make([]time.Duration, 0, rounds)
	for range rounds {
		start := time.Now()
		recordChecksum(header, payload)
		durations = append(durations, time.Since(start))
	}
	return median(durations)
}

func mean(durations []time.Duration) time.Duration {
	var total time.Duration
	for _, d := range durations {
		total += d
	}
	return total / time.Duration(len(durations))
}

func median(durations []time.Duration) time.Duration {
	sorted := slices.Clone(durations)
	slices.Sort(sorted)
	return sorted[len(sorted)/2]
}
