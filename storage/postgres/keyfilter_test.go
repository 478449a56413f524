package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/ledgerworks/ledger/storage"
	"github.com/ledgerworks/ledger/storage/postgres"
	"github.com/ledgerworks/ledger/storage/postgres/pgtest"
)

// lookupAll looks keys up in one writable transaction and appends those it
// does not find, the way the chain package does; it returns how many it
// found.
func lookupAll(t *testing.T, b storage.Backend, chain string, keys []string) (found int) {
	t.Helper()
	ctx := context.Background()
	tx, err := b.Begin(ctx, true)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	for _, k := range keys {
		seq, err := tx.LookupKey(ctx, chain, k)
		if err == nil {
			data, err := tx.Entry(ctx, chain, seq)
			if err != nil || string(data) != string(rec(seq, k).Data) {
				t.Fatalf("key %s: seq %d holds %q, %v", k, seq, data, err)
			}
			found++
			continue
		}
		if !errors.Is(err, storage.ErrNotFound) {
			t.Fatal(err)
		}
		h, err := tx.Head(ctx, chain)
		if err != nil && !errors.Is(err, storage.ErrNotFound) {
			t.Fatal(err)
		}
		if err := tx.Append(ctx, chain, rec(h.Seq+1, k), head(h.Seq+1)); err != nil {
			t.Fatalf("append %s: %v", k, err)
		}
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	return found
}

func keys(prefix string, n int) []string {
	ks := make([]string, n)
	for i := range ks {
		ks[i] = fmt.Sprintf("%s%d", prefix, i)
	}
	return ks
}

// Batches of keyed look-ups use the chain's key filter; keys written by
// another process (another backend on the same schema) in between are
// still found, and none is stored twice.
func TestKeyFilterFindsEveryKey(t *testing.T) {
	dbURL := pgtest.URL(t)
	schema := pgtest.NewSchema(t, dbURL)
	ctx := context.Background()
	open := func() *postgres.Backend {
		b, err := postgres.Open(ctx, dbURL, postgres.Options{Schema: schema})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { b.Close() })
		return b
	}
	a, other := open(), open()

	filter := func(b *postgres.Backend, want uint64) {
		t.Helper()
		if seq, ok := postgres.FilterSeq(b, "c"); !ok || seq != want {
			t.Fatalf("key filter reaches seq %d (exists: %v), want %d", seq, ok, want)
		}
	}
	if n := lookupAll(t, a, "c", keys("a", 500)); n != 0 {
		t.Fatalf("found %d keys in an empty chain", n)
	}
	filter(a, 500) // built while the chain was empty, kept current by the commit
	// Every key again, in a batch that builds the filter, plus new ones.
	if n := lookupAll(t, a, "c", append(keys("a", 500), keys("b", 100)...)); n != 500 {
		t.Fatalf("found %d of 500 stored keys", n)
	}
	filter(a, 600)
	// Another process appends; this one's filter is behind and catches up.
	if n := lookupAll(t, other, "c", keys("x", 50)); n != 0 {
		t.Fatal(n)
	}
	filter(a, 600)
	if n := lookupAll(t, a, "c", append(keys("x", 50), keys("y", 10)...)); n != 50 {
		t.Fatalf("found %d of 50 keys another process stored", n)
	}
	filter(a, 660)
	// This process's own commits keep the filter current.
	if n := lookupAll(t, a, "c", append(keys("y", 10), keys("b", 100)...)); n != 110 {
		t.Fatalf("found %d of 110", n)
	}
	// A rolled-back transaction's keys are not taken for stored ones.
	tx, _ := a.Begin(ctx, true)
	for i, k := range keys("r", 20) {
		for range 3 {
			if _, err := tx.LookupKey(ctx, "c", k); !errors.Is(err, storage.ErrNotFound) {
				t.Fatal(err)
			}
		}
		h, _ := tx.Head(ctx, "c")
		if err := tx.Append(ctx, "c", rec(h.Seq+1, k), head(h.Seq+1)); err != nil {
			t.Fatal(i, err)
		}
	}
	tx.Rollback()
	if n := lookupAll(t, a, "c", keys("r", 20)); n != 0 {
		t.Fatalf("found %d keys of a rolled-back transaction", n)
	}
	filter(a, 680)
	checkChain(t, a, "c", 500+100+50+10+20)
}
