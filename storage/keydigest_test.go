package storage_test

import (
	"fmt"
	"testing"

	"pgregory.net/rapid"

	"github.com/ledgerworks/ledger/storage"
)

// TestKeyDigesterMatchesKeyDigest: batches of keys of every length around
// the one-block limit digest as KeyDigest does one by one, with the
// digester's memory reused between batches.
func TestKeyDigesterMatchesKeyDigest(t *testing.T) {
	var d storage.KeyDigester
	rapid.Check(t, func(t *rapid.T) {
		keys := rapid.SliceOfN(rapid.StringN(0, 60, -1), 0, 40).Draw(t, "keys")
		out := make([][storage.KeyDigestSize]byte, len(keys))
		d.Digest(out, keys)
		for i, key := range keys {
			if want := storage.KeyDigest(key); out[i] != want {
				t.Fatalf("key %d %q (%d bytes): %x, want %x", i, key, len(key), out[i], want)
			}
		}
	})
}

func TestKeyDigesterShortOutputPanics(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Fatal("no panic for an output shorter than the keys")
		}
	}()
	var d storage.KeyDigester
	d.Digest(make([][storage.KeyDigestSize]byte, 1), []string{"a", "b"})
}

// BenchmarkKeyDigester digests 512 keys of 32 hex digits (the benchmark
// driver's keys) in one batch, beside KeyDigest one by one over the same
// keys, and reports the batch's time as a ratio of it.
func BenchmarkKeyDigester(b *testing.B) {
	keys := make([]string, 512)
	for i := range keys {
		keys[i] = fmt.Sprintf("%032x", uint64(i)*0x9e3779b97f4a7c15)
	}
	out := make([][storage.KeyDigestSize]byte, len(keys))
	var oneByOne float64
	b.Run("one-by-one", func(b *testing.B) {
		for b.Loop() {
			for i, key := range keys {
				out[i] = storage.KeyDigest(key)
			}
		}
		oneByOne = float64(b.Elapsed().Nanoseconds()) / float64(b.N*len(keys))
		b.ReportMetric(oneByOne, "ns/key")
	})
	b.Run("batch", func(b *testing.B) {
		var d storage.KeyDigester
		for b.Loop() {
			d.Digest(out, keys)
		}
		perKey := float64(b.Elapsed().Nanoseconds()) / float64(b.N*len(keys))
		b.ReportMetric(perKey, "ns/key")
		if oneByOne > 0 {
			b.ReportMetric(perKey/oneByOne, "x-one-by-one")
		}
	})
}
