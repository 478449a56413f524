package postgres_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ledgerworks/ledger/storage"
	"github.com/ledgerworks/ledger/storage/postgres"
	"github.com/ledgerworks/ledger/storage/postgres/pgtest"
)

func head(seq uint64) storage.Head {
	h := storage.Head{Seq: seq, TimeUnixNano: int64(seq) * 1000}
	h.Hash[0], h.Hash[31] = byte(seq), byte(seq>>8)
	return h
}

func rec(seq uint64, key string) storage.Record {
	return storage.Record{Seq: seq, IdempotencyKey: key, Data: []byte(fmt.Sprintf("entry %d %s", seq, key))}
}

// appendN appends entries from+1..from+n to chain in one transaction; keys
// are "k<seq>" when keyed.
func appendN(t *testing.T, b storage.Backend, chain string, from, n uint64, keyed bool) {
	t.Helper()
	ctx := context.Background()
	tx, err := b.Begin(ctx, true)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	h, err := tx.Head(ctx, chain)
	switch {
	case from == 0 && !errors.Is(err, storage.ErrNotFound):
		t.Fatalf("head of new chain: %v %v", h, err)
	case from > 0 && (err != nil || h.Seq != from):
		t.Fatalf("head = %v, %v; want seq %d", h, err, from)
	}
	for s := from + 1; s <= from+n; s++ {
		key := ""
		if keyed {
			key = fmt.Sprintf("k%d", s)
		}
		if err := tx.Append(ctx, chain, rec(s, key), head(s)); err != nil {
			t.Fatalf("append %d: %v", s, err)
		}
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
}

func TestHeadAppendRead(t *testing.T) {
	b := pgtest.Open(t)
	ctx := context.Background()

	tx, err := b.Begin(ctx, true)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Head(ctx, "c"); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("head of new chain: %v", err)
	}
	if err := tx.Append(ctx, "c", rec(1, "a"), head(1)); err != nil {
		t.Fatal(err)
	}
	if err := tx.Append(ctx, "c", rec(2, ""), head(2)); err != nil {
		t.Fatal(err)
	}
	if err := tx.Append(ctx, "c", rec(3, ""), head(3)); err != nil {
		t.Fatal(err)
	}
	// Own writes, before commit.
	if h, err := tx.Head(ctx, "c"); err != nil || h != head(3) {
		t.Fatalf("head in tx = %v, %v", h, err)
	}
	if d, err := tx.Entry(ctx, "c", 2); err != nil || string(d) != string(rec(2, "").Data) {
		t.Fatalf("entry in tx = %q, %v", d, err)
	}
	if s, err := tx.LookupKey(ctx, "c", "a"); err != nil || s != 1 {
		t.Fatalf("lookup in tx = %d, %v", s, err)
	}
	if _, err := tx.LookupKey(ctx, "c", ""); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("lookup of empty key: %v", err)
	}
	var seqs []uint64
	for r, err := range tx.Entries(ctx, "c", 2) {
		if err != nil {
			t.Fatal(err)
		}
		seqs = append(seqs, r.Seq)
	}
	if fmt.Sprint(seqs) != "[2 3]" {
		t.Fatalf("entries in tx = %v", seqs)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); !errors.Is(err, storage.ErrTxDone) {
		t.Fatalf("second commit: %v", err)
	}
	if err := tx.Rollback(); err != nil {
		t.Fatalf("rollback after commit: %v", err)
	}
	if _, err := tx.Head(ctx, "c"); !errors.Is(err, storage.ErrTxDone) {
		t.Fatalf("head after commit: %v", err)
	}

	rtx, err := b.Begin(ctx, false)
	if err != nil {
		t.Fatal(err)
	}
	defer rtx.Rollback()
	if rtx.Writable() {
		t.Fatal("read-only tx is writable")
	}
	if h, err := rtx.Head(ctx, "c"); err != nil || h != head(3) {
		t.Fatalf("head = %v, %v", h, err)
	}
	if d, err := rtx.Entry(ctx, "c", 1); err != nil || string(d) != string(rec(1, "a").Data) {
		t.Fatalf("entry = %q, %v", d, err)
	}
	for _, s := range []uint64{0, 4, 1 << 63, ^uint64(0)} {
		if _, err := rtx.Entry(ctx, "c", s); !errors.Is(err, storage.ErrNotFound) {
			t.Fatalf("entry %d: %v", s, err)
		}
	}
	if _, err := rtx.Entry(ctx, "d", 1); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("entry of other chain: %v", err)
	}
	if s, err := rtx.LookupKey(ctx, "c", "a"); err != nil || s != 1 {
		t.Fatalf("lookup = %d, %v", s, err)
	}
	if _, err := rtx.LookupKey(ctx, "d", "a"); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("lookup on other chain: %v", err)
	}
	if err := rtx.Append(ctx, "c", rec(4, ""), head(4)); !errors.Is(err, storage.ErrReadOnly) {
		t.Fatalf("append in read-only tx: %v", err)
	}
	if err := rtx.StatePut(ctx, []byte("k"), []byte("v")); !errors.Is(err, storage.ErrReadOnly) {
		t.Fatalf("state put in read-only tx: %v", err)
	}
	if err := rtx.Commit(); err != nil {
		t.Fatalf("commit of read-only tx: %v", err)
	}
}

func TestDuplicates(t *testing.T) {
	b := pgtest.Open(t)
	ctx := context.Background()
	appendN(t, b, "c", 0, 3, true) // keys k1..k3

	tx, err := b.Begin(ctx, true)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	// An append without a preceding Head locks the head itself.
	if err := tx.Append(ctx, "c", rec(3, ""), head(3)); !errors.Is(err, storage.ErrDuplicate) {
		t.Fatalf("append of existing seq: %v", err)
	}
	if err := tx.Append(ctx, "c", rec(4, "k2"), head(4)); !errors.Is(err, storage.ErrDuplicate) {
		t.Fatalf("append of committed key: %v", err)
	}
	if err := tx.Append(ctx, "c", rec(4, "k4"), head(4)); err != nil {
		t.Fatal(err)
	}
	if err := tx.Append(ctx, "c", rec(5, "k4"), head(5)); !errors.Is(err, storage.ErrDuplicate) {
		t.Fatalf("append of key buffered in this tx: %v", err)
	}
	if err := tx.Append(ctx, "c", rec(7, ""), head(7)); !errors.Is(err, postgres.ErrOutOfOrder) {
		t.Fatalf("append with a gap: %v", err)
	}
	if err := tx.Append(ctx, "c", rec(5, ""), head(6)); !errors.Is(err, postgres.ErrOutOfOrder) {
		t.Fatalf("append with record and head disagreeing: %v", err)
	}
	// The same key on another chain is independent.
	if err := tx.Append(ctx, "d", rec(1, "k2"), head(1)); err != nil {
		t.Fatal(err)
	}
	// Refused appends leave the transaction usable.
	if err := tx.Append(ctx, "c", rec(5, ""), head(5)); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	checkChain(t, b, "c", 5)
	checkChain(t, b, "d", 1)

	// Over the seq range of the bigint column.
	tx, err = b.Begin(ctx, true)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	if err := tx.Append(ctx, "e", rec(1<<63, ""), head(1<<63)); !errors.Is(err, postgres.ErrSeqRange) {
		t.Fatalf("append above MaxSeq: %v", err)
	}
}

// checkChain checks that chain holds exactly seqs 1..n with head n.
func checkChain(t *testing.T, b storage.Backend, chain string, n uint64) {
	t.Helper()
	ctx := context.Background()
	tx, err := b.Begin(ctx, false)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	h, err := tx.Head(ctx, chain)
	if err != nil || h.Seq != n {
		t.Fatalf("head of %s = %v, %v; want seq %d", chain, h, err, n)
	}
	want := uint64(1)
	for r, err := range tx.Entries(ctx, chain, 0) {
		if err != nil {
			t.Fatal(err)
		}
		if r.Seq != want {
			t.Fatalf("%s: entry seq %d, want %d", chain, r.Seq, want)
		}
		want++
	}
	if want != n+1 {
		t.Fatalf("%s: %d entries, want %d", chain, want-1, n)
	}
}

func TestRollbackAndPlaceholders(t *testing.T) {
	b := pgtest.Open(t)
	ctx := context.Background()
	appendN(t, b, "a", 0, 1, false)

	// Rolled back appends are gone.
	tx, _ := b.Begin(ctx, true)
	if _, err := tx.Head(ctx, "b"); !errors.Is(err, storage.ErrNotFound) {
		t.Fatal(err)
	}
	if err := tx.Append(ctx, "b", rec(1, "x"), head(1)); err != nil {
		t.Fatal(err)
	}
	if err := tx.Rollback(); err != nil {
		t.Fatal(err)
	}
	// A committed transaction that locked new chains without appending
	// leaves no chain behind.
	tx, _ = b.Begin(ctx, true)
	for _, c := range []string{"b", "c", "a"} {
		_, _ = tx.Head(ctx, c)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	rtx, _ := b.Begin(ctx, false)
	defer rtx.Rollback()
	var names []string
	for c, err := range rtx.Chains(ctx, "") {
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, c.Chain)
	}
	if fmt.Sprint(names) != "[a]" {
		t.Fatalf("chains = %v", names)
	}
	if _, err := rtx.Head(ctx, "b"); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("head of rolled-back chain: %v", err)
	}
	if _, err := rtx.LookupKey(ctx, "b", "x"); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("key of rolled-back entry: %v", err)
	}
}

func TestPagesAndOrder(t *testing.T) {
	b := pgtest.Open(t)
	ctx := context.Background()
	n := uint64(postgres.ScanPageSize*2 + 17)
	appendN(t, b, "long", 0, n, true)
	checkChain(t, b, "long", n)

	// Entries from the middle, stopping early.
	tx, _ := b.Begin(ctx, false)
	defer tx.Rollback()
	next := uint64(300)
	for r, err := range tx.Entries(ctx, "long", 300) {
		if err != nil || r.Seq != next {
			t.Fatalf("entry %d: %v (want %d)", r.Seq, err, next)
		}
		if r.IdempotencyKey != "" {
			t.Fatalf("Entries filled in the key")
		}
		if next == 320 {
			break
		}
		next++
	}

	// Chains in byte order, over several pages, from a bound.
	wtx, _ := b.Begin(ctx, true)
	var names []string
	for i := range postgres.ScanPageSize + 10 {
		names = append(names, fmt.Sprintf("chain/%04d", i))
	}
	names = append(names, "Zeta", "zeta", "\u00e9t\u00e9", "a b", "A")
	for _, c := range names {
		if err := wtx.Append(ctx, c, rec(1, ""), head(1)); err != nil {
			t.Fatal(err)
		}
	}
	// Listed before commit: the listing flushes the buffer.
	count := 0
	for _, err := range wtx.Chains(ctx, "") {
		if err != nil {
			t.Fatal(err)
		}
		count++
	}
	if count != len(names)+1 {
		t.Fatalf("chains in tx: %d, want %d", count, len(names)+1)
	}
	if err := wtx.Commit(); err != nil {
		t.Fatal(err)
	}
	rtx, _ := b.Begin(ctx, false)
	defer rtx.Rollback()
	var got []string
	for c, err := range rtx.Chains(ctx, "chain/0100") {
		if err != nil {
			t.Fatal(err)
		}
		if c.Head != head(c.Head.Seq) {
			t.Fatalf("head of %s = %v", c.Chain, c.Head)
		}
		got = append(got, c.Chain)
	}
	var want []string
	for _, c := range append(names, "long") {
		if c >= "chain/0100" {
			want = append(want, c)
		}
	}
	sortBytes(want)
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("chains from chain/0100:\n got %v\nwant %v", got, want)
	}
}

func sortBytes(s []string) {
	for i := range s {
		for j := i + 1; j < len(s); j++ {
			if s[j] < s[i] {
				s[i], s[j] = s[j], s[i]
			}
		}
	}
}

func TestBigBatchFlushes(t *testing.T) {
	b := pgtest.Open(t)
	n := uint64(postgres.MaxBufferedEntries + 1000)
	appendN(t, b, "big", 0, n, true)
	checkChain(t, b, "big", n)
	appendN(t, b, "big", n, 10, false)
	checkChain(t, b, "big", n+10)
}

func TestState(t *testing.T) {
	b := pgtest.Open(t)
	ctx := context.Background()
	tx, _ := b.Begin(ctx, true)
	defer tx.Rollback()
	put := func(k, v string) {
		t.Helper()
		if err := tx.StatePut(ctx, []byte(k), []byte(v)); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 600 {
		put(fmt.Sprintf("n/%04d", i), fmt.Sprint(i))
	}
	put("a", "1")
	put("b", "2")
	put("b", "3")
	put("c", "")
	if err := tx.StateDelete(ctx, []byte("a")); err != nil {
		t.Fatal(err)
	}
	if err := tx.StateDelete(ctx, []byte("missing")); err != nil {
		t.Fatal(err)
	}
	if v, err := tx.StateGet(ctx, []byte("b")); err != nil || string(v) != "3" {
		t.Fatalf("get b = %q, %v", v, err)
	}
	if _, err := tx.StateGet(ctx, []byte("a")); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("get deleted: %v", err)
	}
	if v, err := tx.StateGet(ctx, []byte("c")); err != nil || v == nil || len(v) != 0 {
		t.Fatalf("get empty value = %v, %v", v, err)
	}
	scan := func(tx storage.Tx, start, end string, reverse bool) []string {
		t.Helper()
		var s, e []byte
		if start != "" {
			s = []byte(start)
		}
		if end != "" {
			e = []byte(end)
		}
		var keys []string
		for kv, err := range tx.StateScan(ctx, s, e, reverse) {
			if err != nil {
				t.Fatal(err)
			}
			keys = append(keys, string(kv.Key))
		}
		return keys
	}
	if k := scan(tx, "", "n/", false); fmt.Sprint(k) != "[b c]" {
		t.Fatalf("scan [,n/) = %v", k)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}

	rtx, _ := b.Begin(ctx, false)
	defer rtx.Rollback()
	all := scan(rtx, "", "", false)
	if len(all) != 602 || all[0] != "b" || all[601] != "n/0599" {
		t.Fatalf("scan all: %d keys, %v ... %v", len(all), all[:2], all[len(all)-1])
	}
	if !sortedStrings(all) {
		t.Fatal("scan not in key order")
	}
	rev := scan(rtx, "", "", true)
	if len(rev) != 602 || rev[0] != "n/0599" || rev[601] != "b" {
		t.Fatalf("reverse scan: %d keys", len(rev))
	}
	mid := scan(rtx, "n/0100", "n/0400", true)
	if len(mid) != 300 || mid[0] != "n/0399" || mid[299] != "n/0100" {
		t.Fatalf("reverse bounded scan: %d keys %v..%v", len(mid), mid[0], mid[len(mid)-1])
	}
	mid = scan(rtx, "n/0100", "n/0400", false)
	if len(mid) != 300 || mid[0] != "n/0100" || mid[299] != "n/0399" {
		t.Fatalf("bounded scan: %d keys", len(mid))
	}
	if k := scan(rtx, "z", "a", false); len(k) != 0 {
		t.Fatalf("empty range: %v", k)
	}
	// Early stop.
	for kv, err := range rtx.StateScan(ctx, nil, nil, false) {
		if err != nil || string(kv.Key) != "b" {
			t.Fatal(kv, err)
		}
		break
	}
	if v, err := rtx.StateGet(ctx, []byte("n/0042")); err != nil || string(v) != "42" {
		t.Fatalf("get = %q, %v", v, err)
	}
}

func sortedStrings(s []string) bool {
	for i := 1; i < len(s); i++ {
		if bytes.Compare([]byte(s[i-1]), []byte(s[i])) >= 0 {
			return false
		}
	}
	return true
}

// A read-only transaction sees one snapshot.
func TestReadSnapshot(t *testing.T) {
	b := pgtest.Open(t)
	ctx := context.Background()
	appendN(t, b, "c", 0, 1, false)
	rtx, _ := b.Begin(ctx, false)
	defer rtx.Rollback()
	if h, err := rtx.Head(ctx, "c"); err != nil || h.Seq != 1 {
		t.Fatal(h, err)
	}
	appendN(t, b, "c", 1, 1, false)
	appendN(t, b, "d", 0, 1, false)
	if h, err := rtx.Head(ctx, "c"); err != nil || h.Seq != 1 {
		t.Fatalf("head after a concurrent commit = %v, %v; want the snapshot's seq 1", h, err)
	}
	if _, err := rtx.Entry(ctx, "c", 2); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("entry committed after the snapshot: %v", err)
	}
	if _, err := rtx.Head(ctx, "d"); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("chain created after the snapshot: %v", err)
	}
}

// A second writer of a chain waits at Head until the first ends, then sees
// its head; this holds for a chain that does not exist yet too.
func TestHeadLock(t *testing.T) {
	for _, existing := range []bool{true, false} {
		t.Run(fmt.Sprintf("existing=%v", existing), func(t *testing.T) {
			b := pgtest.Open(t)
			ctx := context.Background()
			var from uint64
			if existing {
				appendN(t, b, "c", 0, 1, false)
				from = 1
			}
			tx1, _ := b.Begin(ctx, true)
			defer tx1.Rollback()
			if _, err := tx1.Head(ctx, "c"); err != nil && !errors.Is(err, storage.ErrNotFound) {
				t.Fatal(err)
			}
			got := make(chan storage.Head, 1)
			errc := make(chan error, 1)
			go func() {
				tx2, err := b.Begin(ctx, true)
				if err != nil {
					errc <- err
					return
				}
				defer tx2.Rollback()
				h, err := tx2.Head(ctx, "c")
				if err != nil {
					errc <- err
					return
				}
				got <- h
			}()
			select {
			case h := <-got:
				t.Fatalf("second writer got head %v while the first held it", h)
			case err := <-errc:
				t.Fatal(err)
			case <-time.After(300 * time.Millisecond):
			}
			if err := tx1.Append(ctx, "c", rec(from+1, ""), head(from+1)); err != nil {
				t.Fatal(err)
			}
			if err := tx1.Commit(); err != nil {
				t.Fatal(err)
			}
			select {
			case h := <-got:
				if h != head(from+1) {
					t.Fatalf("second writer got %v, want %v", h, head(from+1))
				}
			case err := <-errc:
				t.Fatal(err)
			case <-time.After(10 * time.Second):
				t.Fatal("second writer still waiting")
			}
		})
	}
}

// Many writers append to a few chains concurrently with overlapping keys:
// each key is stored once, seqs have no gaps.
func TestConcurrentWriters(t *testing.T) {
	b := pgtest.Open(t)
	ctx := context.Background()
	chains := []string{"x", "y", "z"}
	var wg sync.WaitGroup
	errs := make(chan error, 100)
	for w := range 12 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 30 {
				c := chains[(w+i)%len(chains)]
				key := fmt.Sprintf("key-%d", i) // shared by all writers
				for {
					err := appendKeyed(ctx, b, c, key)
					if errors.Is(err, postgres.ErrRetryable) {
						continue
					}
					if err != nil {
						errs <- err
						return
					}
					break
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	for _, c := range chains {
		tx, _ := b.Begin(ctx, false)
		h, err := tx.Head(ctx, c)
		if err != nil {
			t.Fatal(err)
		}
		tx.Rollback()
		if h.Seq != 30 {
			t.Fatalf("chain %s has %d entries, want 30 (one per key)", c, h.Seq)
		}
		checkChain(t, b, c, 30)
	}
}

// appendKeyed appends an entry with key unless the chain holds it, the way
// the chain package does: lock the head, look the key up, append.
func appendKeyed(ctx context.Context, b storage.Backend, chain, key string) error {
	tx, err := b.Begin(ctx, true)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	h, err := tx.Head(ctx, chain)
	if err != nil && !errors.Is(err, storage.ErrNotFound) {
		return err
	}
	if _, err := tx.LookupKey(ctx, chain, key); err == nil {
		return tx.Commit()
	} else if !errors.Is(err, storage.ErrNotFound) {
		return err
	}
	if err := tx.Append(ctx, chain, rec(h.Seq+1, key), head(h.Seq+1)); err != nil {
		return err
	}
	return tx.Commit()
}

// crossLock runs two writable transactions that each take one lock and
// then wait for the other's; it returns their errors.
func crossLock(t *testing.T, b storage.Backend, first, second func(ctx context.Context, tx storage.Tx, which int) error) (error, error) {
	ctx := context.Background()
	tx1, _ := b.Begin(ctx, true)
	defer tx1.Rollback()
	tx2, _ := b.Begin(ctx, true)
	defer tx2.Rollback()
	if err := first(ctx, tx1, 0); err != nil {
		t.Fatal(err)
	}
	if err := first(ctx, tx2, 1); err != nil {
		t.Fatal(err)
	}
	errc := make(chan error, 1)
	go func() {
		err := second(ctx, tx1, 0)
		if err != nil {
			tx1.Rollback()
		}
		errc <- err
	}()
	time.Sleep(100 * time.Millisecond)
	err2 := second(ctx, tx2, 1)
	if err2 != nil {
		tx2.Rollback()
	}
	return <-errc, err2
}

// Two transactions locking two heads in opposite orders: the one that
// locks out of byte order gives up after UnorderedLockWait instead of
// waiting for deadlock detection.
func TestUnorderedHeadsFailFast(t *testing.T) {
	b := pgtest.Open(t)
	appendN(t, b, "a", 0, 1, false)
	appendN(t, b, "b", 0, 1, false)
	names := [2][2]string{{"a", "b"}, {"b", "a"}}
	var waited time.Duration
	err1, err2 := crossLock(t, b,
		func(ctx context.Context, tx storage.Tx, w int) error { _, err := tx.Head(ctx, names[w][0]); return err },
		func(ctx context.Context, tx storage.Tx, w int) error {
			start := time.Now()
			_, err := tx.Head(ctx, names[w][1])
			if w == 1 {
				waited = time.Since(start)
			}
			return err
		})
	if err1 != nil || err2 == nil {
		t.Fatalf("want only the out-of-order locker to fail, got %v and %v", err1, err2)
	}
	if !errors.Is(err2, postgres.ErrRetryable) || !errors.Is(err2, storage.ErrIO) || !strings.Contains(err2.Error(), "55P03") {
		t.Fatalf("error = %v, want ErrRetryable from a lock timeout (55P03)", err2)
	}
	if waited > 900*time.Millisecond {
		t.Fatalf("gave up after %v: waited for deadlock detection", waited)
	}
}

// A real deadlock (state rows locked in opposite orders) is ErrRetryable.
func TestDeadlockIsRetryable(t *testing.T) {
	b := pgtest.Open(t)
	ctx := context.Background()
	tx, _ := b.Begin(ctx, true)
	tx.StatePut(ctx, []byte("x"), []byte("1"))
	tx.StatePut(ctx, []byte("y"), []byte("1"))
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	keys := [2][2]string{{"x", "y"}, {"y", "x"}}
	err1, err2 := crossLock(t, b,
		func(ctx context.Context, tx storage.Tx, w int) error {
			_, err := tx.StateGet(ctx, []byte(keys[w][0]))
			return err
		},
		func(ctx context.Context, tx storage.Tx, w int) error {
			_, err := tx.StateGet(ctx, []byte(keys[w][1]))
			return err
		})
	if (err1 == nil) == (err2 == nil) {
		t.Fatalf("want exactly one deadlock victim, got %v and %v", err1, err2)
	}
	err := errors.Join(err1, err2)
	if !errors.Is(err, postgres.ErrRetryable) || !errors.Is(err, storage.ErrIO) || !strings.Contains(err.Error(), "40P01") {
		t.Fatalf("deadlock error = %v, want ErrRetryable (40P01) wrapping storage.ErrIO", err)
	}
}

func TestNameAndStats(t *testing.T) {
	b := pgtest.Open(t)
	if strings.Contains(b.Name(), ":"+"ledger@") || strings.Contains(b.Name(), "password") {
		t.Fatalf("Name shows the password: %s", b.Name())
	}
	appendN(t, b, "c", 0, 100, true)
	st, err := b.Stats(context.Background())
	if err != nil || st.SizeBytes <= 0 {
		t.Fatalf("stats = %v, %v", st, err)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Begin(context.Background(), false); !errors.Is(err, storage.ErrClosed) {
		t.Fatalf("begin after close: %v", err)
	}
}

func TestRedactedName(t *testing.T) {
	for in, want := range map[string]string{
		"postgres://u:secret@h:5433/db?sslmode=disable":          "postgres://u@h:5433/db?sslmode=disable",
		"postgresql://u@h/db":                                    "postgresql://u@h/db",
		"postgres://u@h/db?password=secret&sslmode=disable":      "postgres://u@h/db?sslmode=disable",
		"host=h port=5433 user=u password=secret dbname=db":      "postgres://u@h:5433/db",
		"host=/run/postgresql user=u password='sec ret' dbname=": "postgres://u@/?host=%2Frun%2Fpostgresql",
	} {
		if got := postgres.RedactURL(in); got != want {
			t.Errorf("RedactURL(%q) = %q, want %q", in, got, want)
		}
	}
}

// Names with a NUL byte (or not UTF-8) cannot be stored in PostgreSQL text; reads find
// nothing, Chains treats a NUL in its bound as "after the prefix", and the
// transaction stays usable.
func TestNULBytes(t *testing.T) {
	b := pgtest.Open(t)
	ctx := context.Background()
	appendN(t, b, "a", 0, 1, false)
	appendN(t, b, "a\x01", 0, 1, false)
	appendN(t, b, "b", 0, 1, false)
	tx, _ := b.Begin(ctx, true)
	defer tx.Rollback()
	if err := tx.Append(ctx, "x\x00", rec(1, ""), head(1)); !errors.Is(err, postgres.ErrText) {
		t.Fatalf("append to a name with NUL: %v", err)
	}
	if err := tx.Append(ctx, "x", rec(1, "k\x00"), head(1)); !errors.Is(err, postgres.ErrText) {
		t.Fatalf("append with a key with NUL: %v", err)
	}
	if _, err := tx.Head(ctx, "a\x00"); !errors.Is(err, storage.ErrNotFound) {
		t.Fatal(err)
	}
	if err := tx.Append(ctx, "x\xff", rec(1, ""), head(1)); !errors.Is(err, postgres.ErrText) {
		t.Fatalf("append to a name that is not UTF-8: %v", err)
	}
	if _, err := tx.LookupKey(ctx, "a", "\xff"); !errors.Is(err, storage.ErrNotFound) {
		t.Fatal(err)
	}
	if _, err := tx.LookupKey(ctx, "a", "k\x00"); !errors.Is(err, storage.ErrNotFound) {
		t.Fatal(err)
	}
	if _, err := tx.Entry(ctx, "a\x00", 1); !errors.Is(err, storage.ErrNotFound) {
		t.Fatal(err)
	}
	var got []string
	for c, err := range tx.Chains(ctx, "a\x00") {
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, c.Chain)
	}
	if fmt.Sprintf("%q", got) != `["a\x01" "b"]` {
		t.Fatalf("chains from a\\x00: %q", got)
	}
	if err := tx.Append(ctx, "x", rec(1, ""), head(1)); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
}

// A canceled context fails the call that carries it, not the writable
// transaction, which a group commit shares with other callers.
func TestCanceledContextLeavesTransactionIntact(t *testing.T) {
	b := pgtest.Open(t)
	ctx := context.Background()
	appendN(t, b, "a", 0, 1, true)
	tx, _ := b.Begin(ctx, true)
	defer tx.Rollback()
	if _, err := tx.Head(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	canceled, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := tx.Head(canceled, "b"); !errors.Is(err, context.Canceled) {
		t.Fatalf("head with a canceled context: %v", err)
	}
	if _, err := tx.LookupKey(canceled, "a", "zz"); !errors.Is(err, context.Canceled) {
		t.Fatalf("lookup with a canceled context: %v", err)
	}
	if err := tx.Append(ctx, "a", rec(2, "k2"), head(2)); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	checkChain(t, b, "a", 2)
}

func TestSearchPathSchema(t *testing.T) {
	for path, want := range map[string]string{
		"ledger_eu": "ledger_eu", "Ledger": "ledger", `"Ledger EU"`: "Ledger EU", `"a""b"`: `a"b`,
		"a,b": "", "$user, public": "", "1abc": "", `"a"b"`: "",
	} {
		if got := postgres.SingleSchema(path); got != want {
			t.Errorf("schema of search_path %s = %q, want %q", path, got, want)
		}
	}
}
