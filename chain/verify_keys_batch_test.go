package chain

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"path/filepath"
	"testing"
	"time"

	"github.com/ledgerworks/ledger/chain/internal/multiset"
	"github.com/ledgerworks/ledger/storage"
	"github.com/ledgerworks/ledger/storage/bolt"
)

// recordsOnly hides a transaction's optional interfaces, so that
// indexBatches falls back to ScanKeys.
type recordsOnly struct{ storage.Tx }

// failingBatches yields the transaction's first batch, then fail.
type failingBatches struct {
	storage.Tx
	fail error
}

func (f failingBatches) ScanKeyBatches(ctx context.Context, chain string) iter.Seq2[[]storage.KeyRef, error] {
	return func(yield func([]storage.KeyRef, error) bool) {
		for refs, err := range f.Tx.(storage.KeyBatchScanner).ScanKeyBatches(ctx, chain) {
			if !yield(refs, err) || err != nil {
				return
			}
			break
		}
		yield(nil, f.fail)
	}
}

// keyedBackend writes keys keyed entries of chain "k" (every fifth entry
// without a key) to a bbolt file with opts, in transactions of 1,000, and
// returns the backend and the number of keyed entries.
func keyedBackend(tb testing.TB, opts bolt.Options, entries int) (*bolt.Backend, int) {
	tb.Helper()
	ctx := context.Background()
	b, err := bolt.Open(filepath.Join(tb.TempDir(), "ledger.db"), opts)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { b.Close() })
	keyed := 0
	for from := 1; from <= entries; from += 1000 {
		tx, err := b.Begin(ctx, true)
		if err != nil {
			tb.Fatal(err)
		}
		for seq := uint64(from); seq < uint64(min(from+1000, entries+1)); seq++ {
			key := ""
			if seq%5 != 0 {
				key, keyed = fmt.Sprintf("key-%d", seq), keyed+1
			}
			if err := tx.Append(ctx, "k", storage.Record{Seq: seq, IdempotencyKey: key, Data: []byte("x")}, storage.Head{Seq: seq}); err != nil {
				tx.Rollback()
				tb.Fatal(err)
			}
		}
		if err := tx.Commit(); err != nil {
			tb.Fatal(err)
		}
	}
	return b, keyed
}

// sumOneByOne is the index side summed a record at a time through
// ScanKeys and addHash, the definition sumIndex must meet.
func sumOneByOne(t *testing.T, stx storage.Tx, k *multiset.Key) multiset.Sum {
	t.Helper()
	var m multiset.Sum
	mh := multiset.NewHasher(k)
	for ref, err := range stx.ScanKeys(context.Background(), "k") {
		if err != nil {
			t.Fatal(err)
		}
		var one multiset.Sum
		mh.Sum(&one, []multiset.Item{{Digest: ref.Digest, Seq: ref.Seq}}, true)
		m.Merge(&one)
	}
	return m
}

// sumIndex sums every index record once, through the storage's batches
// and through ScanKeys alike, on a file alone and under memory tables:
// the same sum and count as the records added one by one.
func TestSumIndexBatchesAndRecords(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct {
		name string
		opts bolt.Options
	}{
		{"LogOff", bolt.Options{Log: bolt.LogOff}},
		{"Log", bolt.Options{Log: bolt.LogOn, MemtableBytesMax: 1 << 30}},
	} {
		t.Run(c.name, func(t *testing.T) {
			b, keyed := keyedBackend(t, c.opts, 5_300)
			stx, err := b.Begin(ctx, false)
			if err != nil {
				t.Fatal(err)
			}
			defer stx.Rollback()
			if _, ok := stx.(storage.KeyBatchScanner); !ok {
				t.Fatalf("%T is not a storage.KeyBatchScanner", stx)
			}
			k, err := multiset.NewKey()
			if err != nil {
				t.Fatal(err)
			}
			want := sumOneByOne(t, stx, &k)
			if want.Count() != uint64(keyed) {
				t.Fatalf("ScanKeys yields %d records for %d keys", want.Count(), keyed)
			}
			for _, via := range []struct {
				name string
				tx   storage.Tx
			}{{"batches", stx}, {"ScanKeys", recordsOnly{stx}}} {
				got, err := sumIndex(ctx, via.tx, "k", &k)
				if err != nil || got != want {
					t.Fatalf("sumIndex through %s: %d records, %v; one by one: %d records, another sum: %v",
						via.name, got.Count(), err, want.Count(), got != want)
				}
				batches := 0
				for refs, err := range indexBatches(ctx, via.tx, "k") {
					if err != nil || len(refs) == 0 || len(refs) > max(keyCheckBatchSize, storage.KeyBatchSizeMax) {
						t.Fatalf("through %s: a batch of %d records, %v", via.name, len(refs), err)
					}
					batches++
				}
				if batches < keyed/max(keyCheckBatchSize, storage.KeyBatchSizeMax) {
					t.Fatalf("through %s: %d records in %d batches", via.name, keyed, batches)
				}
			}
		})
	}
}

// An error of the storage's batches, or of ScanKeys, is sumIndex's; so is
// the end of its context.
func TestSumIndexErrors(t *testing.T) {
	ctx := context.Background()
	b, _ := keyedBackend(t, bolt.Options{Log: bolt.LogOff}, 3_000)
	stx, err := b.Begin(ctx, false)
	if err != nil {
		t.Fatal(err)
	}
	defer stx.Rollback()
	k, err := multiset.NewKey()
	if err != nil {
		t.Fatal(err)
	}
	damaged := fmt.Errorf("damaged run: %w", storage.ErrCorrupt)
	if _, err := sumIndex(ctx, failingBatches{stx, damaged}, "k", &k); !errors.Is(err, storage.ErrCorrupt) {
		t.Fatalf("sumIndex over failing batches: %v, want the batches' error", err)
	}
	ended, cancel := context.WithCancel(ctx)
	cancel()
	for _, tx := range []storage.Tx{stx, recordsOnly{stx}} {
		if _, err := sumIndex(ended, tx, "k", &k); !errors.Is(err, context.Canceled) {
			t.Fatalf("sumIndex through %T with an ended context: %v, want context.Canceled", tx, err)
		}
	}
	other, err := b.Begin(ctx, false)
	if err != nil {
		t.Fatal(err)
	}
	other.Rollback()
	for _, tx := range []storage.Tx{other, recordsOnly{other}} {
		if _, err := sumIndex(ctx, tx, "k", &k); !errors.Is(err, storage.ErrTxDone) {
			t.Fatalf("sumIndex through an ended %T: %v, want storage.ErrTxDone", tx, err)
		}
	}
}

// sumIndexBenchEntries is the chain length of BenchmarkSumIndex.
const sumIndexBenchEntries = 250_000

// BenchmarkSumIndex sums a chain's key index as a verify does, through the
// storage's batches; the baseline, alternated with it in the same run, is
// the same sum through ScanKeys a record at a time. The metric "ratio" is
// the baseline's time ÷ the batches' (above 1: the batches are faster).
// LogOff reads the file's runs; Log reads the keys of memory tables.
func BenchmarkSumIndex(b *testing.B) {
	for _, c := range []struct {
		name string
		opts bolt.Options
	}{
		{"LogOff", bolt.Options{Log: bolt.LogOff}},
		{"Log", bolt.Options{Log: bolt.LogOn, MemtableBytesMax: 1 << 30}},
	} {
		b.Run(c.name, func(b *testing.B) { benchmarkSumIndex(b, c.opts) })
	}
}

func benchmarkSumIndex(b *testing.B, opts bolt.Options) {
	ctx := context.Background()
	backend, keyed := keyedBackend(b, opts, sumIndexBenchEntries)
	stx, err := backend.Begin(ctx, false)
	if err != nil {
		b.Fatal(err)
	}
	defer stx.Rollback()
	k, err := multiset.NewKey()
	if err != nil {
		b.Fatal(err)
	}
	var batched, records time.Duration
	b.ResetTimer()
	for range b.N {
		start := time.Now()
		got, err := sumIndex(ctx, stx, "k", &k)
		batched += time.Since(start)
		start = time.Now()
		want, werr := sumIndex(ctx, recordsOnly{stx}, "k", &k)
		records += time.Since(start)
		if err != nil || werr != nil || got != want || got.Count() != uint64(keyed) {
			b.Fatalf("batches: %d records, %v; ScanKeys: %d records, %v; %d keys", got.Count(), err, want.Count(), werr, keyed)
		}
	}
	b.StopTimer()
	perRecord := func(d time.Duration) float64 { return float64(d.Nanoseconds()) / float64(b.N*keyed) }
	b.ReportMetric(perRecord(batched), "ns/record")
	b.ReportMetric(perRecord(records), "scankeys-ns/record")
	b.ReportMetric(float64(records)/float64(batched), "ratio")
}
