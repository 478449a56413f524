package postgres_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/ledgerworks/ledger/chain"
	"github.com/ledgerworks/ledger/storage"
	"github.com/ledgerworks/ledger/storage/postgres"
	"github.com/ledgerworks/ledger/storage/postgres/pgtest"
)

// flushTx makes tx send its buffered appends, as a scan does.
func flushTx(t *testing.T, tx storage.Tx, chain string) {
	t.Helper()
	for _, err := range tx.ScanKeys(context.Background(), chain) {
		if err != nil {
			t.Fatal(err)
		}
	}
}

// A key this transaction appended is found after its buffer went to the
// server, whether it was looked up through the key filter or prepared.
func TestOwnAppendsAfterFlush(t *testing.T) {
	for _, prepared := range []bool{false, true} {
		t.Run(map[bool]string{false: "filter", true: "prepared"}[prepared], func(t *testing.T) {
			b := pgtest.Open(t)
			ctx := context.Background()
			appendN(t, b, "c", 0, 10, true) // keys k1..k10
			tx, err := b.Begin(ctx, true)
			if err != nil {
				t.Fatal(err)
			}
			defer tx.Rollback()
			ks := []string{"n1", "n2", "n3", "n4"}
			if prepared {
				var batch []storage.ChainKey
				for _, k := range ks {
					batch = append(batch, storage.ChainKey{Chain: "c", Key: k})
				}
				tx.(storage.KeyPreparer).PrepareKeys(ctx, batch)
			}
			for i, k := range ks {
				if _, err := tx.LookupKey(ctx, "c", k); !errors.Is(err, storage.ErrNotFound) {
					t.Fatalf("LookupKey(%s) before its append: %v", k, err)
				}
				seq := uint64(11 + i)
				if err := tx.Append(ctx, "c", rec(seq, k), head(seq)); err != nil {
					t.Fatal(err)
				}
			}
			flushTx(t, tx, "c")
			for i, k := range ks {
				if seq, err := tx.LookupKey(ctx, "c", k); err != nil || seq != uint64(11+i) {
					t.Fatalf("LookupKey(%s) after the flush = %d, %v; want %d", k, seq, err, 11+i)
				}
				if err := tx.Append(ctx, "c", rec(15, k), head(15)); !errors.Is(err, storage.ErrDuplicate) {
					t.Fatalf("second append of %s after the flush: %v, want ErrDuplicate", k, err)
				}
			}
		})
	}
}

// prepare hands the transaction's PrepareKeys the pairs chain, key, ….
func prepare(t *testing.T, tx storage.Tx, pairs ...string) {
	t.Helper()
	p, ok := tx.(storage.KeyPreparer)
	if !ok {
		t.Fatalf("%T is not a storage.KeyPreparer", tx)
	}
	var keys []storage.ChainKey
	for i := 0; i+1 < len(pairs); i += 2 {
		keys = append(keys, storage.ChainKey{Chain: pairs[i], Key: pairs[i+1]})
	}
	p.PrepareKeys(context.Background(), keys)
}

// wantKey checks LookupKey's answer: seq, or ErrNotFound for seq 0.
func wantKey(t *testing.T, tx storage.Tx, chain, key string, seq uint64) {
	t.Helper()
	got, err := tx.LookupKey(context.Background(), chain, key)
	switch {
	case seq == 0 && !errors.Is(err, storage.ErrNotFound):
		t.Fatalf("LookupKey(%q, %q) = %d, %v; want ErrNotFound", chain, key, got, err)
	case seq > 0 && (err != nil || got != seq):
		t.Fatalf("LookupKey(%q, %q) = %d, %v; want %d", chain, key, got, err, seq)
	}
}

// Prepared keys of several chains (one new, keys twice, keys that cannot
// be stored) answer LookupKey and the found entries' Entry without another
// round trip, in a writable and in a read-only transaction; the
// transaction's own appends still win.
func TestPrepareKeysAnswers(t *testing.T) {
	b := pgtest.Open(t)
	ctx := context.Background()
	appendN(t, b, "a", 0, 5, true) // k1..k5
	appendN(t, b, "b", 0, 3, true) // k1..k3
	batch := []string{"a", "k1", "a", "x", "b", "k2", "n", "z", "a", "k1", "b", "k1", "a", "k5",
		"a", "", "a\x00", "k1", "b", "k9"}
	for _, writable := range []bool{false, true} { // the read-only one first: the writable one appends
		t.Run(map[bool]string{true: "writable", false: "read-only"}[writable], func(t *testing.T) {
			tx, err := b.Begin(ctx, writable)
			if err != nil {
				t.Fatal(err)
			}
			defer tx.Rollback()
			prepare(t, tx, batch...)
			before := postgres.RoundTrips(b)
			for _, c := range []struct {
				chain, key string
				seq        uint64
			}{{"a", "k1", 1}, {"a", "x", 0}, {"b", "k2", 2}, {"n", "z", 0}, {"a", "k1", 1}, {"b", "k1", 1},
				{"a", "k5", 5}, {"a", "", 0}, {"a\x00", "k1", 0}, {"b", "k9", 0}} {
				wantKey(t, tx, c.chain, c.key, c.seq)
				if c.seq == 0 {
					continue
				}
				data, err := tx.Entry(ctx, c.chain, c.seq)
				if err != nil || !bytes.Equal(data, rec(c.seq, c.key).Data) {
					t.Fatalf("Entry(%q, %d) = %q, %v", c.chain, c.seq, data, err)
				}
			}
			if n := postgres.RoundTrips(b) - before; n != 0 {
				t.Fatalf("the prepared look-ups took %d round trips, want 0", n)
			}
			if !writable {
				return
			}
			// Appends after the preparation: the new key is found, a
			// prepared key is a duplicate, and a new chain takes entries.
			if err := tx.Append(ctx, "a", rec(6, "x"), head(6)); err != nil {
				t.Fatal(err)
			}
			wantKey(t, tx, "a", "x", 6)
			if err := tx.Append(ctx, "a", rec(7, "k5"), head(7)); !errors.Is(err, storage.ErrDuplicate) {
				t.Fatalf("append of a prepared stored key: %v, want ErrDuplicate", err)
			}
			if err := tx.Append(ctx, "n", rec(1, "z"), head(1)); err != nil {
				t.Fatal(err)
			}
			// A later preparation replaces the earlier one and sees the
			// transaction's appends, sent or not.
			prepare(t, tx, "a", "x", "n", "z", "b", "k3")
			wantKey(t, tx, "a", "x", 6)
			wantKey(t, tx, "n", "z", 1)
			wantKey(t, tx, "b", "k3", 3)
			flushTx(t, tx, "a")
			prepare(t, tx, "a", "x", "n", "z")
			wantKey(t, tx, "a", "x", 6)
			wantKey(t, tx, "n", "z", 1)
			if err := tx.Commit(); err != nil {
				t.Fatal(err)
			}
			checkChain(t, b, "a", 6)
			checkChain(t, b, "n", 1)
		})
	}
}

// Keys prepared and appended in a transaction that rolls back are absent
// afterwards, and the new chain it locked is not left behind.
func TestPrepareKeysRolledBack(t *testing.T) {
	b := pgtest.Open(t)
	ctx := context.Background()
	appendN(t, b, "a", 0, 2, true)
	tx, err := b.Begin(ctx, true)
	if err != nil {
		t.Fatal(err)
	}
	prepare(t, tx, "a", "r1", "n", "r2", "a", "k1")
	if err := tx.Append(ctx, "a", rec(3, "r1"), head(3)); err != nil {
		t.Fatal(err)
	}
	if err := tx.Append(ctx, "n", rec(1, "r2"), head(1)); err != nil {
		t.Fatal(err)
	}
	flushTx(t, tx, "a") // the server holds them too
	if err := tx.Rollback(); err != nil {
		t.Fatal(err)
	}
	tx, err = b.Begin(ctx, true)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	prepare(t, tx, "a", "r1", "n", "r2", "a", "k1")
	wantKey(t, tx, "a", "r1", 0)
	wantKey(t, tx, "n", "r2", 0)
	wantKey(t, tx, "a", "k1", 1)
	if _, err := tx.Entry(ctx, "a", 3); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("Entry of a rolled-back append: %v", err)
	}
	tx.Rollback()
	checkChain(t, b, "a", 2)
	rtx, _ := b.Begin(ctx, false)
	defer rtx.Rollback()
	for c, err := range rtx.Chains(ctx, "") {
		if err != nil || c.Chain != "a" {
			t.Fatalf("chain %q (%v) after the rollback; want only a", c.Chain, err)
		}
	}
}

// A key prepared absent stays absent for the transaction: a concurrent
// writer of the same key waits for the chain's head, which the
// preparation locked, and then finds the key; a writer that bypasses the
// head (a raw INSERT) makes the commit fail on the unique constraint. The
// key is stored once either way.
func TestPrepareKeysConcurrentWriter(t *testing.T) {
	bs := pgtest.OpenShared(t, 2)
	a, other := bs[0], bs[1]
	t.Cleanup(func() { a.Close(); other.Close() })
	ctx := context.Background()
	appendN(t, a, "c", 0, 1, true)

	tx, err := a.Begin(ctx, true)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	prepare(t, tx, "c", "k", "c", "j")
	done := make(chan error, 1)
	go func() { done <- appendKeyed(ctx, other, "c", "k") }()
	select {
	case err := <-done:
		t.Fatalf("a concurrent writer did not wait for the prepared head: %v", err)
	case <-time.After(200 * time.Millisecond):
	}
	wantKey(t, tx, "c", "k", 0)
	if err := tx.Append(ctx, "c", rec(2, "k"), head(2)); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil { // it found the key and appended nothing
		t.Fatalf("concurrent writer of the same key: %v", err)
	}
	checkChain(t, a, "c", 2)

	tx, err = a.Begin(ctx, true)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	prepare(t, tx, "c", "j")
	conn, err := pgtest.Connect(ctx, pgtest.URL(t))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	table := pgx.Identifier{a.Schema(), "entries"}.Sanitize()
	if _, err := conn.Exec(ctx, "INSERT INTO "+table+" (chain_id, seq, idempotency_key, data) VALUES ('c', 100, 'j', '\\x00')"); err != nil {
		t.Fatal(err)
	}
	wantKey(t, tx, "c", "j", 0) // prepared under the lock, which the raw insert ignored
	if err := tx.Append(ctx, "c", rec(3, "j"), head(3)); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); !errors.Is(err, storage.ErrDuplicate) {
		t.Fatalf("commit of a key inserted behind the head's back: %v, want ErrDuplicate", err)
	}
	var n int
	if err := conn.QueryRow(ctx, "SELECT count(*) FROM "+table+" WHERE chain_id = 'c' AND idempotency_key = 'j'").Scan(&n); err != nil || n != 1 {
		t.Fatalf("key j stored %d times (%v), want once", n, err)
	}
}

// Two engines on one database append overlapping batches of keyed requests
// over several chains with AppendBatch, in different orders, at once: each
// key is stored once and every engine is handed that entry.
func TestPrepareKeysConcurrentBatches(t *testing.T) {
	bs := pgtest.OpenShared(t, 2)
	const (
		engines = 2
		rounds  = 6
		keysMax = 60
		chains  = 5
	)
	type seen struct {
		seq  uint64
		hash [32]byte
	}
	var (
		mu     sync.Mutex
		stored = make(map[string]seen)
		wg     sync.WaitGroup
	)
	ctx := context.Background()
	for e := range engines {
		db, err := chain.OpenBackend(bs[e], chain.Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(e), 7))
			for round := range rounds {
				reqs := make([]chain.Request, 0, keysMax)
				for _, i := range rng.Perm(keysMax)[:keysMax/2+rng.IntN(keysMax/2)] {
					key := fmt.Sprintf("r%d-%d", round, i)
					reqs = append(reqs, chain.Request{Chain: fmt.Sprintf("c%d", i%chains), IdempotencyKey: key,
						Type: "t/v1", Payload: []byte(key)})
				}
				var results []chain.Result
				err := db.Update(ctx, func(tx *chain.Tx) error {
					var err error
					results, err = tx.AppendBatch(reqs, results[:0])
					return err
				})
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				for _, r := range results {
					k := r.Entry.Chain + "/" + r.Entry.IdempotencyKey
					s, ok := stored[k]
					if ok && (s.seq != r.Entry.Seq || s.hash != r.Entry.Hash) {
						t.Errorf("key %s: seq %d, earlier seq %d", k, r.Entry.Seq, s.seq)
					}
					stored[k] = seen{r.Entry.Seq, r.Entry.Hash}
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	keyed := 0
	tx, err := bs[0].Begin(ctx, false)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	for c := range chains {
		for ref, err := range tx.ScanKeys(ctx, fmt.Sprintf("c%d", c)) {
			if err != nil {
				t.Fatal(err)
			}
			_ = ref
			keyed++
		}
	}
	if keyed != len(stored) {
		t.Fatalf("%d keyed entries stored, %d distinct keys appended", keyed, len(stored))
	}
}

// An AppendBatch of 1,000 keyed requests over ten chains costs a bounded
// number of round trips, not one per key: a batch of new keys, then the
// same batch retried (every key found, every entry read for its replay).
// openEngine opens the engine on b; it is closed when the test ends.
func openEngine(t *testing.T, b *postgres.Backend) *chain.DB {
	t.Helper()
	db, err := chain.OpenBackend(b, chain.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

func TestPrepareKeysRoundTrips(t *testing.T) {
	b := pgtest.Open(t)
	db := openEngine(t, b)
	ctx := context.Background()
	batch := func(first int) []chain.Request {
		reqs := make([]chain.Request, 1000)
		for i := range reqs {
			key := fmt.Sprintf("k%d", first+i)
			reqs[i] = chain.Request{Chain: fmt.Sprintf("c%d", i%10), IdempotencyKey: key, Type: "t/v1", Payload: []byte(key)}
		}
		return reqs
	}
	run := func(reqs []chain.Request, replayed bool) int64 {
		t.Helper()
		before := postgres.RoundTrips(b)
		var results []chain.Result
		err := db.Update(ctx, func(tx *chain.Tx) error { // fn may run on another goroutine: no t.Fatal there
			var err error
			results, err = tx.AppendBatch(reqs, results[:0])
			return err
		})
		n := postgres.RoundTrips(b) - before
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range results {
			if r.Replayed != replayed {
				t.Fatalf("key %s: replayed %v, want %v", r.Entry.IdempotencyKey, r.Replayed, replayed)
			}
		}
		return n
	}
	run(batch(0), false) // creates the chains
	for _, c := range []struct {
		name     string
		reqs     []chain.Request
		replayed bool
	}{{"new keys", batch(1000), false}, {"retried", batch(1000), true}, {"new keys again", batch(2000), false}} {
		// prepare + commit, and a key filter built or caught up per chain
		if n := run(c.reqs, c.replayed); n > 2+10 {
			t.Errorf("%s: %d round trips for 1,000 keyed appends over 10 chains", c.name, n)
		} else {
			t.Logf("%s: %d round trips", c.name, n)
		}
	}
}

// A retried batch (chain.DB.AppendBatch) is read in one round trip
// (ReadKeys), without a transaction; the same batch with a new request
// among the retries reads once, then runs its transaction.
func TestAppendBatchRetryRoundTrips(t *testing.T) {
	b := pgtest.Open(t)
	db := openEngine(t, b)
	ctx := context.Background()
	reqs := make([]chain.Request, 1000)
	for i := range reqs {
		key := fmt.Sprintf("k%d", i)
		reqs[i] = chain.Request{Chain: fmt.Sprintf("c%d", i%10), IdempotencyKey: key, Type: "t/v1", Payload: []byte(key)}
	}
	if _, err := db.AppendBatch(ctx, reqs, nil); err != nil {
		t.Fatal(err)
	}
	before := postgres.RoundTrips(b)
	results, err := db.AppendBatch(ctx, reqs, nil)
	if n := postgres.RoundTrips(b) - before; err != nil || n != 1 {
		t.Fatalf("retried batch of 1,000: %v, %d round trips; want 1", err, n)
	}
	for i, r := range results {
		if !r.Replayed || r.Entry.IdempotencyKey != reqs[i].IdempotencyKey || r.Entry.Seq != uint64(i/10+1) {
			t.Fatalf("result %d: %+v, want a replay of seq %d", i, r, i/10+1)
		}
	}
	fresh := append(reqs[:len(reqs):len(reqs)], chain.Request{Chain: "c0", IdempotencyKey: "new", Type: "t/v1", Payload: []byte("new")})
	before = postgres.RoundTrips(b)
	results, err = db.AppendBatch(ctx, fresh, nil)
	n := postgres.RoundTrips(b) - before
	if err != nil || len(results) != len(fresh) || results[len(reqs)].Replayed || !results[0].Replayed {
		t.Fatalf("retried batch with a new request: %d results, %v", len(results), err)
	}
	if n < 2 || n > 1+2+10 { // the read, then prepare and commit, and key filters caught up per chain
		t.Fatalf("retried batch with a new request: %d round trips", n)
	}
}

// ScanKeyBatches reads an index of several pages (keyed rows among
// unkeyed ones) exactly as ScanKeys does, in batches of at most
// storage.KeyBatchSizeMax.
func TestScanKeyBatchesPages(t *testing.T) {
	b := pgtest.Open(t)
	ctx := context.Background()
	conn, err := pgtest.Connect(ctx, pgtest.URL(t))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	n := 2*postgres.KeyBatchScanPageSize + 3*storage.KeyBatchSizeMax/2 // keyed and unkeyed rows
	schema := pgx.Identifier{b.Schema()}.Sanitize()
	for _, stmt := range []string{
		`INSERT INTO ` + schema + `.chains VALUES ('c', $1::bigint, '\x` + fmt.Sprintf("%064x", 1) + `', 0)`,
		`INSERT INTO ` + schema + `.entries SELECT 'c', g, CASE WHEN g % 7 = 3 THEN NULL ELSE 'k' || g END, '\x00'
			FROM generate_series(1, $1::bigint) g`,
	} {
		if _, err := conn.Exec(ctx, stmt, n); err != nil {
			t.Fatal(err)
		}
	}
	tx, err := b.Begin(ctx, false)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	want := make(map[storage.KeyRef]int)
	for ref, err := range tx.ScanKeys(ctx, "c") {
		if err != nil {
			t.Fatal(err)
		}
		want[ref]++
	}
	keyed := 0
	for g := 1; g <= n; g++ {
		if g%7 != 3 {
			keyed++
		}
	}
	if len(want) != keyed {
		t.Fatalf("ScanKeys yields %d records, want %d", len(want), keyed)
	}
	got := 0
	for refs, err := range tx.(storage.KeyBatchScanner).ScanKeyBatches(ctx, "c") {
		if err != nil {
			t.Fatal(err)
		}
		if len(refs) == 0 || len(refs) > storage.KeyBatchSizeMax {
			t.Fatalf("a batch of %d records", len(refs))
		}
		for _, ref := range refs {
			if want[ref]--; want[ref] < 0 {
				t.Fatalf("record %x seq %d: yielded once too often", ref.Digest, ref.Seq)
			}
			if ref.Digest != storage.KeyDigest(fmt.Sprintf("k%d", ref.Seq)) {
				t.Fatalf("seq %d: digest %x, not its key's", ref.Seq, ref.Digest)
			}
			got++
		}
	}
	if got != keyed {
		t.Fatalf("ScanKeyBatches yields %d records, want %d", got, keyed)
	}
}

// The heads of a batch's new chains are created in one round trip, and a
// key on a chain that another transaction creates meanwhile (its head row
// not yet committed when the batch's heads were locked) is not taken for
// absent: the preparation waits for that creator and then leaves the key
// to LookupKey, which finds it.
func TestPrepareKeysNewChains(t *testing.T) {
	bs := pgtest.OpenShared(t, 2)
	a, other := bs[0], bs[1]
	t.Cleanup(func() { a.Close(); other.Close() })
	ctx := context.Background()

	tx, err := a.Begin(ctx, true)
	if err != nil {
		t.Fatal(err)
	}
	var pairs []string
	for i := range 50 {
		pairs = append(pairs, fmt.Sprintf("new%02d", i), "k")
	}
	before := postgres.RoundTrips(a)
	prepare(t, tx, pairs...)
	if n := postgres.RoundTrips(a) - before; n > 2 {
		t.Fatalf("preparing keys of 50 new chains took %d round trips, want 2", n)
	}
	before = postgres.RoundTrips(a)
	for i := range 50 {
		c := fmt.Sprintf("new%02d", i)
		wantKey(t, tx, c, "k", 0)
		if err := tx.Append(ctx, c, rec(1, "k"), head(1)); err != nil {
			t.Fatal(err)
		}
	}
	if n := postgres.RoundTrips(a) - before; n != 0 {
		t.Fatalf("appending to the prepared new chains took %d round trips, want 0", n)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	checkChain(t, a, "new07", 1)

	creator, err := other.Begin(ctx, true)
	if err != nil {
		t.Fatal(err)
	}
	defer creator.Rollback()
	if _, err := creator.Head(ctx, "m"); !errors.Is(err, storage.ErrNotFound) { // its placeholder row
		t.Fatal(err)
	}
	if err := creator.Append(ctx, "m", rec(1, "k"), head(1)); err != nil {
		t.Fatal(err)
	}
	tx, err = a.Begin(ctx, true)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	prepared := make(chan struct{})
	go func() {
		defer close(prepared)
		prepare(t, tx, "m", "k", "m", "j")
	}()
	select {
	case <-prepared:
		t.Fatal("the preparation did not wait for the chain's creator")
	case <-time.After(200 * time.Millisecond):
	}
	if err := creator.Commit(); err != nil {
		t.Fatal(err)
	}
	<-prepared
	wantKey(t, tx, "m", "k", 1)
	wantKey(t, tx, "m", "j", 0)
	if err := tx.Append(ctx, "m", rec(2, "k"), head(2)); !errors.Is(err, storage.ErrDuplicate) {
		t.Fatalf("append of the key the creator stored: %v, want ErrDuplicate", err)
	}
}
