package bolt

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/ledgerworks/ledger/storage"
)

// BenchmarkGuardedHead measures the recover and fault guard around one call
// (a Head read of a cached chain) beside the same call unguarded, as a ratio.
func BenchmarkGuardedHead(b *testing.B) {
	backend, err := Open(filepath.Join(b.TempDir(), "l.db"), Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer backend.Close()
	ctx := context.Background()
	stx, err := backend.Begin(ctx, true)
	if err != nil {
		b.Fatal(err)
	}
	if err := stx.Append(ctx, "c", storage.Record{Seq: 1, Data: []byte("x")}, storage.Head{Seq: 1}); err != nil {
		b.Fatal(err)
	}
	if err := stx.Commit(); err != nil {
		b.Fatal(err)
	}
	read, err := backend.Begin(ctx, false)
	if err != nil {
		b.Fatal(err)
	}
	defer read.Rollback()
	guarded := read.(*guardedTx)
	var unguarded time.Duration
	b.Run("unguarded", func(b *testing.B) {
		for b.Loop() {
			if _, err := guarded.t.Head(ctx, "c"); err != nil {
				b.Fatal(err)
			}
		}
		unguarded = b.Elapsed() / time.Duration(b.N)
	})
	b.Run("guarded", func(b *testing.B) {
		for b.Loop() {
			if _, err := guarded.Head(ctx, "c"); err != nil {
				b.Fatal(err)
			}
		}
		if perCall := b.Elapsed() / time.Duration(b.N); unguarded > 0 {
			b.ReportMetric(perCall.Seconds()/unguarded.Seconds(), "x-unguarded")
		}
	})
}
