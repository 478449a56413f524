package storagetest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/ledgerworks/ledger/storage"
)

// keyReaderTests check storage.KeyReader; Run runs them, and each skips a
// backend that is not a KeyReader. What a backend says of a new key beyond
// "not found" is its own business, as for KeyProber: these tests only
// require that every acknowledged key is found with its own entry, that
// nothing else is, and that a read sees no write that is not committed.
var keyReaderTests = []struct {
	name string
	fn   func(t *testing.T, b storage.Backend)
}{
	{"ReadKeyCommitted", testReadKeyCommitted},
	{"ReadKeyUncommitted", testReadKeyUncommitted},
	{"ReadKeyCopies", testReadKeyCopies},
	{"ReadKeyEndedContext", testReadKeyEndedContext},
	{"ReadKeyUnderConcurrentCommits", testReadKeyConcurrentCommits},
	{"ReadKeysMixed", testReadKeysMixed},
}

// keyedRecord is one acknowledged keyed entry of a chain.
type keyedRecord struct {
	chain, key string
	seq        uint64
	data       []byte
}

// commitKeyed appends one keyed entry per key, each to its chain, in one
// transaction; heads holds the chains' seqs.
func commitKeyed(t testing.TB, b storage.Backend, heads map[string]uint64, keys []probeKey) []keyedRecord {
	t.Helper()
	records, err := tryCommitKeyed(b, heads, keys)
	if err != nil {
		t.Fatal(err)
	}
	return records
}

// tryCommitKeyed is commitKeyed for another goroutine than the test's.
func tryCommitKeyed(b storage.Backend, heads map[string]uint64, keys []probeKey) ([]keyedRecord, error) {
	tx, err := b.Begin(ctx, true)
	if err != nil {
		return nil, fmt.Errorf("begin: %w", err)
	}
	defer tx.Rollback()
	var out []keyedRecord
	for _, k := range keys {
		seq := heads[k.chain] + 1
		data := []byte(fmt.Sprintf("%s/%s/%d", k.chain, k.key, seq))
		if err := tx.Append(ctx, k.chain, storage.Record{Seq: seq, IdempotencyKey: k.key, Data: data}, head(seq)); err != nil {
			return nil, fmt.Errorf("append %q %q: %w", k.chain, k.key, err)
		}
		heads[k.chain] = seq
		out = append(out, keyedRecord{k.chain, k.key, seq, data})
	}
	if err := tx.Commit(); err != nil {
		return nil, fmt.Errorf("commit: %w", err)
	}
	return out, nil
}

// checkReadKey fails unless r finds every record with its seq and bytes.
func checkReadKey(t testing.TB, r storage.KeyReader, records []keyedRecord) {
	t.Helper()
	if err := tryReadKeys(r, records); err != nil {
		t.Fatal(err)
	}
}

// tryReadKeys checks ReadKey of every record and, when r is a
// storage.KeyBatchReader, ReadKeys of them all, storage.ReadKeysMax at a
// time.
func tryReadKeys(r storage.KeyReader, records []keyedRecord) error {
	for _, rec := range records {
		seq, data, found, err := r.ReadKey(ctx, rec.chain, rec.key)
		if err != nil || !found || seq != rec.seq || !bytes.Equal(data, rec.data) {
			return fmt.Errorf("ReadKey(%q, %q) = %d, %q, %v, %v; want %d, %q, true", rec.chain, rec.key, seq, data, found, err, rec.seq, rec.data)
		}
	}
	batch, ok := r.(storage.KeyBatchReader)
	if !ok {
		return nil
	}
	for part := range slices.Chunk(records, storage.ReadKeysMax) {
		keys := make([]storage.ChainKey, len(part))
		for i, rec := range part {
			keys[i] = storage.ChainKey{Chain: rec.chain, Key: rec.key}
		}
		reads := make([]storage.KeyRead, len(part))
		if err := batch.ReadKeys(ctx, keys, reads); err != nil {
			return fmt.Errorf("ReadKeys of %d keys: %w", len(keys), err)
		}
		for i, rec := range part {
			if got := reads[i]; !got.Found || got.Seq != rec.seq || !bytes.Equal(got.Data, rec.data) {
				return fmt.Errorf("ReadKeys: key %d of %d (%q, %q) = %d, %q, %v; want %d, %q, true",
					i, len(keys), rec.chain, rec.key, got.Seq, got.Data, got.Found, rec.seq, rec.data)
			}
		}
	}
	return nil
}

// checkNotFound fails unless r finds none of the keys, one at a time and,
// when r is a storage.KeyBatchReader, all together.
func checkNotFound(t testing.TB, r storage.KeyReader, keys []probeKey) {
	t.Helper()
	for _, k := range keys {
		if seq, data, found, err := r.ReadKey(ctx, k.chain, k.key); err != nil || found {
			t.Fatalf("ReadKey(%q, %q) of a key never committed = %d, %q, %v, %v; want not found", k.chain, k.key, seq, data, found, err)
		}
	}
	batch, ok := r.(storage.KeyBatchReader)
	if !ok {
		return
	}
	chainKeys := make([]storage.ChainKey, len(keys))
	for i, k := range keys {
		chainKeys[i] = storage.ChainKey{Chain: k.chain, Key: k.key}
	}
	reads := make([]storage.KeyRead, len(keys))
	if err := batch.ReadKeys(ctx, chainKeys, reads); err != nil {
		t.Fatalf("ReadKeys of keys never committed: %v", err)
	}
	for i, got := range reads {
		if got.Found || got.Data != nil {
			t.Fatalf("ReadKeys: key %d (%q, %q), never committed = %+v; want not found", i, keys[i].chain, keys[i].key, got)
		}
	}
}

// testReadKeysMixed reads, in one call, keys found and not found, one key
// twice, a key of one chain asked of another, a chain that does not exist
// and a key that is not UTF-8: each read is what ReadKey says of its key, reads past the keys
// are left as they were, and the bytes are the caller's.
func testReadKeysMixed(t *testing.T, b storage.Backend) {
	r := implementation[storage.KeyBatchReader](t, b)
	records := commitKeyed(t, b, map[string]uint64{}, []probeKey{{"mix/a", "k1"}, {"mix/a", "k2"}, {"mix/b", "k1"}})
	// "\xff" is not UTF-8, which a server backend cannot store: it is
	// never found, and the keys after it are still read as theirs.
	keys := []storage.ChainKey{
		{Chain: "mix/a", Key: "\xff"}, {Chain: "mix/a", Key: "k2"}, {Chain: "mix/a", Key: "never"}, {Chain: "mix/b", Key: "k1"},
		{Chain: "mix/b", Key: "k2"}, {Chain: "mix/none", Key: "k1"}, {Chain: "mix/a", Key: "k2"}, {Chain: "mix/a", Key: "k1"},
	}
	want := []*keyedRecord{nil, &records[1], nil, &records[2], nil, nil, &records[1], &records[0]}
	untouched := storage.KeyRead{Seq: 7, Data: []byte("untouched"), Found: true}
	reads := make([]storage.KeyRead, len(keys)+1)
	reads[len(keys)] = untouched
	for i := range keys {
		reads[i] = storage.KeyRead{Seq: 99, Data: []byte("stale"), Found: true}
	}
	if err := r.ReadKeys(ctx, keys, reads); err != nil {
		t.Fatal(err)
	}
	for i, w := range want {
		got := reads[i]
		if w == nil {
			if got.Found || got.Data != nil || got.Seq != 0 {
				t.Fatalf("ReadKeys: key %d %+v = %+v; want not found", i, keys[i], got)
			}
			continue
		}
		if !got.Found || got.Seq != w.seq || !bytes.Equal(got.Data, w.data) {
			t.Fatalf("ReadKeys: key %d %+v = %d, %q, %v; want %d, %q", i, keys[i], got.Seq, got.Data, got.Found, w.seq, w.data)
		}
	}
	if got := reads[len(keys)]; got.Seq != untouched.Seq || string(got.Data) != "untouched" || !got.Found {
		t.Fatalf("ReadKeys set the read past its keys to %+v", got)
	}
	for _, got := range reads[:len(keys)] {
		for i := range got.Data {
			got.Data[i] ^= 0xFF // the caller owns the bytes
		}
	}
	checkReadKey(t, r, records)
}

func testReadKeyCommitted(t *testing.T, b storage.Backend) {
	r := implementation[storage.KeyReader](t, b)
	heads := map[string]uint64{}
	var committed []keyedRecord
	// Batches of several sizes, as in the probe's test: storage/bolt
	// indexes a batch of 16 keys or more as a run of its own.
	for round, size := range []int{1, 3, 40, 1, 300, 2} {
		var batch []probeKey
		for i := range size {
			chain := fmt.Sprintf("read/%d", i%5)
			if i == 0 {
				chain = fmt.Sprintf("read/new-%d", round)
			}
			batch = append(batch, probeKey{chain, fmt.Sprintf("key-%d-%d", round, i)})
		}
		committed = append(committed, commitKeyed(t, b, heads, batch)...)
		checkReadKey(t, r, committed)
	}
	// The same key on another chain is another entry; a key of one chain
	// is not found on another, nor on a chain that does not exist.
	other := commitKeyed(t, b, heads, []probeKey{{"read/other", "key-0-0"}})
	checkReadKey(t, r, append(committed, other...))
	checkNotFound(t, r, []probeKey{{"read/1", "key-0-0"}, {"read/none", "key-2-1"}, {"read/2", "never"}})
}

func testReadKeyUncommitted(t *testing.T, b storage.Backend) {
	r := implementation[storage.KeyReader](t, b)
	heads := map[string]uint64{}
	committed := commitKeyed(t, b, heads, []probeKey{{"u", "a"}})
	// An open write transaction's appends are not read, nor are they once
	// it has rolled back.
	tx, err := b.Begin(ctx, true)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	for i, key := range []string{"b", "c"} {
		seq := uint64(i + 2)
		if err := tx.Append(ctx, "u", storage.Record{Seq: seq, IdempotencyKey: key, Data: []byte(key)}, head(seq)); err != nil {
			t.Fatal(err)
		}
	}
	if err := tx.Append(ctx, "u/new", storage.Record{Seq: 1, IdempotencyKey: "d", Data: []byte("d")}, head(1)); err != nil {
		t.Fatal(err)
	}
	uncommitted := []probeKey{{"u", "b"}, {"u", "c"}, {"u/new", "d"}}
	checkNotFound(t, r, uncommitted)
	checkReadKey(t, r, committed)
	if err := tx.Rollback(); err != nil {
		t.Fatal(err)
	}
	checkNotFound(t, r, uncommitted)
	checkReadKey(t, r, committed)
}

func testReadKeyCopies(t *testing.T, b storage.Backend) {
	r := implementation[storage.KeyReader](t, b)
	records := commitKeyed(t, b, map[string]uint64{}, []probeKey{{"copy", "k"}})
	_, data, found, err := r.ReadKey(ctx, "copy", "k")
	if err != nil || !found {
		t.Fatalf("ReadKey: %v, %v", found, err)
	}
	for i := range data {
		data[i] ^= 0xFF // the caller owns the bytes: the store's stay as they were
	}
	checkReadKey(t, r, records)
}

func testReadKeyEndedContext(t *testing.T, b storage.Backend) {
	r := implementation[storage.KeyReader](t, b)
	commitKeyed(t, b, map[string]uint64{}, []probeKey{{"ctx", "k"}})
	ended, cancel := context.WithCancel(ctx)
	cancel()
	if _, _, found, err := r.ReadKey(ended, "ctx", "k"); !errors.Is(err, context.Canceled) || found {
		t.Fatalf("ReadKey with an ended context = %v, %v; want context.Canceled", found, err)
	}
	if batch, ok := r.(storage.KeyBatchReader); ok {
		reads := make([]storage.KeyRead, 1)
		if err := batch.ReadKeys(ended, []storage.ChainKey{{Chain: "ctx", Key: "k"}}, reads); !errors.Is(err, context.Canceled) {
			t.Fatalf("ReadKeys with an ended context: %v; want context.Canceled", err)
		}
	}
}

// testReadKeyConcurrentCommits reads every acknowledged key while commits
// run on another goroutine: a key whose commit returned before the read
// began is always found, with its own entry.
func testReadKeyConcurrentCommits(t *testing.T, b storage.Backend) {
	r := implementation[storage.KeyReader](t, b)
	var mu sync.Mutex
	var acknowledged []keyedRecord
	done := make(chan error, 1)
	go func() {
		heads := map[string]uint64{}
		for round := range 60 {
			var batch []probeKey
			for i := range 1 + round%20 {
				batch = append(batch, probeKey{fmt.Sprintf("conc/%d", i%3), fmt.Sprintf("k-%d-%d", round, i)})
			}
			records, err := tryCommitKeyed(b, heads, batch)
			if err != nil {
				done <- err
				return
			}
			mu.Lock()
			acknowledged = append(acknowledged, records...)
			mu.Unlock()
		}
		done <- nil
	}()
	var readErr error
	for {
		select {
		case err := <-done:
			if err != nil {
				t.Fatal(err)
			}
			if readErr != nil {
				t.Fatal(readErr)
			}
			mu.Lock()
			defer mu.Unlock()
			checkReadKey(t, r, acknowledged)
			return
		default:
		}
		if readErr != nil {
			continue // wait for the committer before failing
		}
		mu.Lock()
		seen := acknowledged[:len(acknowledged):len(acknowledged)]
		mu.Unlock()
		readErr = tryReadKeys(r, seen)
	}
}
