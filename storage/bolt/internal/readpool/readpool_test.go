package readpool

import (
	"path/filepath"
	"testing"

	bbolt "go.etcd.io/bbolt"
)

type fakeTx struct {
	btx  *bbolt.Tx
	kept bool
}

func (f *fakeTx) BoltTx() *bbolt.Tx { return f.btx }
func (f *fakeTx) Pooled(kept bool)  { f.kept = kept }

func openDB(t *testing.T) *bbolt.DB {
	t.Helper()
	db, err := bbolt.Open(filepath.Join(t.TempDir(), "p.db"), 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

func begin(t *testing.T, db *bbolt.DB) *fakeTx {
	t.Helper()
	btx, err := db.Begin(false)
	if err != nil {
		t.Fatal(err)
	}
	return &fakeTx{btx: btx}
}

// commit runs one write transaction between BeginWrite and EndWrite and
// returns its id.
func commit(t *testing.T, db *bbolt.DB, p *Pool[*fakeTx]) uint64 {
	t.Helper()
	p.BeginWrite()
	wtx, err := db.Begin(true)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := wtx.CreateBucketIfNotExists([]byte("b")); err != nil {
		t.Fatal(err)
	}
	if err := wtx.Bucket([]byte("b")).Put([]byte{byte(wtx.ID())}, nil); err != nil {
		t.Fatal(err)
	}
	txid := uint64(wtx.ID())
	if err := wtx.Commit(); err != nil {
		t.Fatal(err)
	}
	p.EndWrite(WriteCommitted, txid)
	return txid
}

// TestPoolKeepsOnlyTheLastCommit: a pool keeps a transaction only while it
// reads the file's last commit and no write runs, hands out what it keeps,
// and keeps nothing once closed.
func TestPoolKeepsOnlyTheLastCommit(t *testing.T) {
	db := openDB(t)
	var p Pool[*fakeTx]
	if r := begin(t, db); p.Give(r) || p.Take() != nil {
		t.Fatal("a pool that was not started kept a transaction")
	} else {
		r.btx.Rollback()
	}
	p.Start(db)
	first := begin(t, db)
	if !p.Give(first) || !first.kept || p.IdleCount() != 1 {
		t.Fatalf("a transaction of the last commit was not kept (kept %v, idle %d)", first.kept, p.IdleCount())
	}
	if got := p.Take(); got != first || got.kept {
		t.Fatalf("Take returned %p (kept %v), want %p", got, got != nil && got.kept, first)
	}
	if p.Take() != nil {
		t.Fatal("Take of an empty pool returned a transaction")
	}
	p.Give(first)

	// A write empties the pool, and keeps nothing while it runs.
	p.BeginWrite()
	if p.IdleCount() != 0 {
		t.Fatalf("%d idle transactions while a write runs", p.IdleCount())
	}
	during := begin(t, db)
	if p.Give(during) {
		t.Fatal("a transaction was kept while a write runs")
	}
	during.btx.Rollback()
	p.EndWrite(WriteRolledBack, 0)

	stale := begin(t, db)
	commit(t, db, &p)
	if p.Give(stale) {
		t.Fatal("a transaction of an older commit was kept")
	}
	stale.btx.Rollback()
	fresh := begin(t, db)
	if !p.Give(fresh) {
		t.Fatal("a transaction of the new last commit was not kept")
	}

	// A failed commit leaves the file's state unknown: nothing is kept.
	p.BeginWrite()
	p.EndWrite(WriteFailed, 0)
	unknown := begin(t, db)
	if p.Give(unknown) {
		t.Fatal("a transaction was kept after a failed commit")
	}
	unknown.btx.Rollback()

	commit(t, db, &p)
	last := begin(t, db)
	if !p.Give(last) {
		t.Fatal("a transaction of the last commit was not kept")
	}
	p.Close()
	if p.IdleCount() != 0 || p.Take() != nil {
		t.Fatal("a closed pool holds a transaction")
	}
	again := begin(t, db)
	if p.Give(again) {
		t.Fatal("a closed pool kept a transaction")
	}
	again.btx.Rollback()
}

func TestEndWriteWithoutBeginWritePanics(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Fatal("EndWrite without BeginWrite did not panic")
		}
	}()
	var p Pool[*fakeTx]
	p.EndWrite(WriteRolledBack, 0)
}
