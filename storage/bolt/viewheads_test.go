package bolt_test

import (
	"context"
	"errors"
	"path/filepath"
	"testing"

	"github.com/ledgerworks/ledger/storage"
	"github.com/ledgerworks/ledger/storage/bolt"
)

// TestWriterHeadsEndWithTheTransaction reads heads in a writer, found and
// not found, appends to those chains, ends the writer in each way a writer
// ends, and reads the heads again in the next writer (which is handed the
// first one's memory): each answer is the committed head, never one the
// ended writer read or wrote. Within the writer, a head read before an
// append is not answered after it.
func TestWriterHeadsEndWithTheTransaction(t *testing.T) {
	ctx := context.Background()
	for _, end := range []string{"commit", "commit-async", "rollback"} {
		t.Run(end, func(t *testing.T) {
			b, err := bolt.Open(filepath.Join(t.TempDir(), "ledger.db"), bolt.Options{Log: bolt.LogOn})
			if err != nil {
				t.Fatal(err)
			}
			defer b.Close()
			head := func(tx storage.Tx, chain string) uint64 {
				t.Helper()
				h, err := tx.Head(ctx, chain)
				if errors.Is(err, storage.ErrNotFound) {
					return 0
				}
				if err != nil {
					t.Fatal(err)
				}
				return h.Seq
			}
			commitRecord(t, b, "a", storage.Record{Seq: 1, Data: []byte("a1")})

			tx, err := b.Begin(ctx, true)
			if err != nil {
				t.Fatal(err)
			}
			defer tx.Rollback()
			if a, n := head(tx, "a"), head(tx, "new"); a != 1 || n != 0 {
				t.Fatalf("heads before the appends: a %d, new %d; want 1, 0", a, n)
			}
			for _, c := range []struct {
				chain string
				seq   uint64
			}{{"a", 2}, {"new", 1}} {
				if err := tx.Append(ctx, c.chain, storage.Record{Seq: c.seq, Data: []byte(c.chain)}, testHead(c.seq)); err != nil {
					t.Fatal(err)
				}
				if got := head(tx, c.chain); got != c.seq {
					t.Fatalf("head of %q after its append: %d, want %d", c.chain, got, c.seq)
				}
			}
			if err := tx.Append(ctx, "new", storage.Record{Seq: 1, Data: []byte("again")}, testHead(1)); !errors.Is(err, storage.ErrDuplicate) {
				t.Fatalf("seq 1 of %q twice in one writer: %v, want ErrDuplicate", "new", err)
			}
			if err := endWriter(tx, end); err != nil {
				t.Fatal(err)
			}

			wantA, wantNew := uint64(2), uint64(1)
			if end == "rollback" {
				wantA, wantNew = 1, 0
			}
			next, err := b.Begin(ctx, true)
			if err != nil {
				t.Fatal(err)
			}
			defer next.Rollback()
			if a, n := head(next, "a"), head(next, "new"); a != wantA || n != wantNew {
				t.Fatalf("heads in the next writer: a %d, new %d; want %d, %d", a, n, wantA, wantNew)
			}
		})
	}
}

// commitRecord commits a writer that appends rec to chain, whose head it
// becomes; a failure rolls the writer back, so that Close does not wait
// for it.
func commitRecord(t *testing.T, b *bolt.Backend, chain string, rec storage.Record) {
	t.Helper()
	ctx := context.Background()
	tx, err := b.Begin(ctx, true)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	if err := tx.Append(ctx, chain, rec, testHead(rec.Seq)); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
}

// endWriter ends a writer in one of the ways a writer ends: "commit",
// "commit-async" (waiting for the commit to be durable) or "rollback".
func endWriter(tx storage.Tx, end string) error {
	switch end {
	case "commit":
		return tx.Commit()
	case "commit-async":
		wait, err := tx.(storage.AsyncCommitter).CommitAsync()
		if err != nil {
			return err
		}
		return wait()
	case "rollback":
		return tx.Rollback()
	}
	panic("endWriter: no such end: " + end)
}
