package bolt

import (
	"bytes"
	"context"
	"fmt"
	"iter"
	"os"
	"runtime/debug"

	bbolt "go.etcd.io/bbolt"

	"github.com/ledgerworks/ledger/storage"
	"github.com/ledgerworks/ledger/storage/bolt/internal/readpool"
)

// bbolt trusts the file: a damaged page header, a child pointer beyond the
// file or a meta page whose checksum still matches makes it panic (an
// assertion, an index out of range) or fault on its memory map. A panic must
// never reach the program that embeds the ledger, so every call into bbolt
// made on behalf of a caller runs under recover (and with faults turned into
// panics), and a recovered panic becomes an error matching storage.ErrCorrupt
// that names the file.

// damagedError is the error a recovered bbolt panic becomes.
func damagedError(path string, panicValue any) error {
	return fmt.Errorf("%s: %w: damaged page (%v)", path, storage.ErrCorrupt, panicValue)
}

// guardedTx is a storage.Tx whose calls into bbolt run under recover. Once a
// panic has been recovered, bbolt's view of the transaction is unknown: every
// later call returns the same error, and Commit rolls back instead.
type guardedTx struct {
	t      *tx
	broken error
}

var _ storage.Tx = (*guardedTx)(nil)

// guard recovers a panic of bbolt into *err and marks the transaction
// broken. It is deferred directly, so that its recover() stops the panic.
func (g *guardedTx) guard(err *error, fault bool) {
	debug.SetPanicOnFault(fault)
	if p := recover(); p != nil {
		g.broken = damagedError(g.t.path, p)
		*err = g.broken
	}
}

func (g *guardedTx) Writable() bool { return g.t.Writable() }

func (g *guardedTx) Head(ctx context.Context, chain string) (h storage.Head, err error) {
	if g.broken != nil {
		return h, g.broken
	}
	defer g.guard(&err, debug.SetPanicOnFault(true))
	return g.t.Head(ctx, chain)
}

func (g *guardedTx) Append(ctx context.Context, chain string, rec storage.Record, head storage.Head) (err error) {
	if g.broken != nil {
		return g.broken
	}
	defer g.guard(&err, debug.SetPanicOnFault(true))
	return g.t.Append(ctx, chain, rec, head)
}

func (g *guardedTx) Entry(ctx context.Context, chain string, seq uint64) (data []byte, err error) {
	if g.broken != nil {
		return nil, g.broken
	}
	defer g.guard(&err, debug.SetPanicOnFault(true))
	return g.t.Entry(ctx, chain, seq)
}

func (g *guardedTx) LookupKey(ctx context.Context, chain, key string) (seq uint64, err error) {
	if g.broken != nil {
		return 0, g.broken
	}
	defer g.guard(&err, debug.SetPanicOnFault(true))
	return g.t.LookupKey(ctx, chain, key)
}

func (g *guardedTx) StateGet(ctx context.Context, key []byte) (value []byte, err error) {
	if g.broken != nil {
		return nil, g.broken
	}
	defer g.guard(&err, debug.SetPanicOnFault(true))
	return g.t.StateGet(ctx, key)
}

func (g *guardedTx) StatePut(ctx context.Context, key, value []byte) (err error) {
	if g.broken != nil {
		return g.broken
	}
	defer g.guard(&err, debug.SetPanicOnFault(true))
	return g.t.StatePut(ctx, key, value)
}

func (g *guardedTx) StateDelete(ctx context.Context, key []byte) (err error) {
	if g.broken != nil {
		return g.broken
	}
	defer g.guard(&err, debug.SetPanicOnFault(true))
	return g.t.StateDelete(ctx, key)
}

func (g *guardedTx) Entries(ctx context.Context, chain string, fromSeq uint64) iter.Seq2[storage.Record, error] {
	return guardedSeq(g, g.t.Entries(ctx, chain, fromSeq))
}

func (g *guardedTx) Chains(ctx context.Context, from string) iter.Seq2[storage.ChainHead, error] {
	return guardedSeq(g, g.t.Chains(ctx, from))
}

func (g *guardedTx) StateScan(ctx context.Context, start, end []byte, reverse bool) iter.Seq2[storage.KeyValue, error] {
	return guardedSeq(g, g.t.StateScan(ctx, start, end, reverse))
}

// guardedSeq runs inner under recover. A panic raised by the consumer's own
// loop body passes through unchanged: only bbolt's panics become errors, and
// the iterator tells them apart by whether the consumer was running when
// the panic passed.
func guardedSeq[T any](g *guardedTx, inner iter.Seq2[T, error]) iter.Seq2[T, error] {
	return func(yield func(T, error) bool) {
		var zero T
		if g.broken != nil {
			yield(zero, g.broken)
			return
		}
		inYield, stopped := false, false
		err := func() (err error) {
			defer func(fault bool) {
				debug.SetPanicOnFault(fault)
				if inYield {
					return // the consumer's panic keeps going
				}
				if p := recover(); p != nil {
					g.broken = damagedError(g.t.path, p)
					err = g.broken
				}
			}(debug.SetPanicOnFault(true))
			for item, err := range inner {
				inYield = true
				more := yield(item, err)
				inYield = false
				if !more {
					stopped = true
					return nil
				}
			}
			return nil
		}()
		if err != nil && !stopped {
			yield(zero, err)
		}
	}
}

func (g *guardedTx) Commit() (err error) {
	if g.broken != nil {
		g.rollback()
		return g.broken
	}
	defer func(fault bool) {
		debug.SetPanicOnFault(fault)
		if p := recover(); p != nil {
			g.broken = damagedError(g.t.path, p)
			err = g.broken
			g.rollback()
		}
	}(debug.SetPanicOnFault(true))
	return g.t.Commit()
}

func (g *guardedTx) Rollback() (err error) {
	if g.broken != nil {
		g.rollback()
		return nil
	}
	defer g.guard(&err, debug.SetPanicOnFault(true))
	return g.t.Rollback()
}

// rollback ends the bbolt transaction of a broken guardedTx, so that its
// locks are released; a second panic there leaves nothing more to do.
func (g *guardedTx) rollback() {
	defer g.t.finishWrite(readpool.WriteFailed, 0) // what a panic left of the file is not known
	defer func() { _ = recover() }()
	g.t.done = true
	_ = g.t.tx.Rollback()
}

// openGuarded is bbolt.Open under recover. bbolt opens the file through
// options.OpenFile, which keeps it here: after a panic the file is closed,
// which releases its lock (the memory map of the damaged file stays).
func openGuarded(path string, options *bbolt.Options) (db *bbolt.DB, err error) {
	var file *os.File
	opened := *options
	opened.OpenFile = func(name string, flag int, mode os.FileMode) (*os.File, error) {
		f, err := os.OpenFile(name, flag, mode)
		file = f
		return f, err
	}
	defer func(fault bool) {
		debug.SetPanicOnFault(fault)
		if p := recover(); p != nil {
			if file != nil {
				file.Close()
			}
			db, err = nil, fmt.Errorf("open %w", damagedError(path, p))
		}
	}(debug.SetPanicOnFault(true))
	return bbolt.Open(path, FileMode, &opened)
}

// walkFile reads every page of every bucket of an existing file, read-only
// and under recover, before the file is opened for writing. A writable open
// rebuilds the freelist (the file keeps none: NoFreelistSync) by walking
// every page on a goroutine of bbolt's own, where a damaged page's panic
// cannot be recovered and would end the process; the walk meets such a page
// first, here, and reports it as storage.ErrCorrupt. Keys are checked to
// ascend, as bbolt's walk checks them.
func walkFile(path string, options *bbolt.Options) error {
	readOnly := *options
	readOnly.ReadOnly = true
	db, err := openGuarded(path, &readOnly)
	if err != nil {
		return err
	}
	defer db.Close()
	return walkView(path, db)
}

func walkView(path string, db *bbolt.DB) (err error) {
	defer func(fault bool) {
		debug.SetPanicOnFault(fault)
		if p := recover(); p != nil {
			err = fmt.Errorf("open %w", damagedError(path, p))
		}
	}(debug.SetPanicOnFault(true))
	return db.View(func(btx *bbolt.Tx) error {
		return btx.ForEach(func(name []byte, b *bbolt.Bucket) error {
			return walkBucket(path, name, b)
		})
	})
}

// walkBucketDepthMax bounds the nesting of buckets the walk follows; the
// layout nests one level (the key runs).
const walkBucketDepthMax = 4

func walkBucket(path string, name []byte, b *bbolt.Bucket) error {
	return walkBucketAt(path, name, b, 0)
}

func walkBucketAt(path string, name []byte, b *bbolt.Bucket, depth int) error {
	if depth > walkBucketDepthMax {
		return fmt.Errorf("open %s: %w: buckets nested deeper than %d under %q", path, storage.ErrCorrupt, walkBucketDepthMax, name)
	}
	var previous []byte
	cursor := b.Cursor()
	for k, v := cursor.First(); k != nil; k, v = cursor.Next() {
		if previous != nil && bytes.Compare(k, previous) <= 0 {
			return fmt.Errorf("open %s: %w: damaged page: keys of bucket %q out of order", path, storage.ErrCorrupt, name)
		}
		previous = k
		if v != nil {
			continue
		}
		if child := b.Bucket(k); child != nil {
			if err := walkBucketAt(path, k, child, depth+1); err != nil {
				return err
			}
		}
	}
	return nil
}

// walkExisting walks the file at path before a writable open when it exists
// and holds data (see walkFile); a new or empty file has nothing to walk.
func walkExisting(path string, options *bbolt.Options) error {
	if options.ReadOnly {
		return nil
	}
	info, err := os.Stat(path)
	if err != nil || info.Size() == 0 {
		return nil // the writable open creates it, or reports why it cannot
	}
	return walkFile(path, options)
}

// prepareGuarded is prepare under recover.
func (b *Backend) prepareGuarded(readOnly bool) (err error) {
	defer func(fault bool) {
		debug.SetPanicOnFault(fault)
		if p := recover(); p != nil {
			err = fmt.Errorf("open %w", damagedError(b.path, p))
		}
	}(debug.SetPanicOnFault(true))
	return b.prepare(readOnly)
}
