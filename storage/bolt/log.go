package bolt

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"path/filepath"
	"runtime/debug"
	"slices"
	"sync"
	"sync/atomic"
	"unsafe"

	bbolt "go.etcd.io/bbolt"

	"github.com/ledgerworks/ledger/storage"
	"github.com/ledgerworks/ledger/storage/bolt/internal/commitrec"
	"github.com/ledgerworks/ledger/storage/bolt/internal/memtable"
	"github.com/ledgerworks/ledger/storage/bolt/internal/wal"
)

const (
	// MemtableBytesMaxDefault is Options.MemtableBytesMax when zero: small
	// enough that under MemoryBytesMaxDefault the key index keeps 144 MiB
	// (its filter at 1% false positives to about 115,000,000 keys, see
	// doc.go "Memory"), large enough that a checkpoint's fixed cost (its
	// bbolt commit) is spread over a table of records: keyed appends and
	// durable appends measured the same with 8 and 32 MiB
	// (docs/PERFORMANCE.md).
	MemtableBytesMaxDefault = 8 << 20
	// LogSegmentSizeDefault is Options.LogSegmentSizeBytes when zero: the
	// size segments grow to from 1 MiB (wal.SegmentSizeInitial). A segment
	// is zero-filled before its first record, so small ones keep the first
	// commit of a new handle quick; released full-size segments are
	// recycled.
	LogSegmentSizeDefault = 8 << 20
	// LogInitialMmapSizeDefault is the initial size of bbolt's memory map
	// of a file opened for writing with the log on, when
	// Options.InitialMmapSize is zero (64-bit platforms): address space,
	// not memory. A checkpoint whose commit must grow the map waits for
	// every read transaction, and with the log every transaction holds one;
	// a remap also copies every node of the checkpoint's large transaction.
	// bbolt then grows the file exactly (AllocSize 0): only checkpoints
	// grow it, once each.
	LogInitialMmapSizeDefault = 1 << 30
	// LogDirectorySuffix is appended to the file's path to name its log
	// directory.
	LogDirectorySuffix = "-wal"
)

// LogMode selects how commits reach the file (Options.Log).
type LogMode uint8

const (
	// LogDefault is LogModeDefault.
	LogDefault LogMode = iota
	// LogOn commits through the write-ahead log, memory tables and
	// checkpoints.
	LogOn
	// LogOff commits every transaction straight to the bbolt file.
	LogOff
)

// LogModeDefault is the mode of Options.Log when it is LogDefault: the log
// halves the latency of one durable commit and multiplies what many
// concurrent committers get; its full-disk behaviour is in the package's
// Caveats and docs/GUARANTEES.md.
const LogModeDefault = LogOn

func (o Options) logOff() bool {
	mode := o.Log
	if mode == LogDefault {
		mode = LogModeDefault
	}
	return mode == LogOff
}

// metaCheckpointLSN is the key, in the meta bucket, of the LSN of the last
// log record the file holds (u64be); missing means 0.
var metaCheckpointLSN = []byte("checkpoint_lsn")

// memView is what a transaction sees of the memory tables: the tables
// (newest first) and the LSN of the last commit it sees.
type memView struct {
	tables []*memtable.Table
	asOf   uint64
}

// logState is the part of Backend that runs the log.
type logState struct {
	log    *wal.Log
	logDir string
	logID  wal.ID
	// logMarked is set once the file records logID as its open log
	// (markLogOpen); owned by the holder of the writer slot.
	logMarked bool
	// closingCheckpoint is set while Close's final checkpoint runs: its
	// transactions record log_state "closed".
	closingCheckpoint bool
	memtableBytesMax  int64

	// writer is the writer slot: one writable transaction at a time.
	writer chan struct{}

	// published is the writers' view: its asOf is the last commit
	// applied to the memory tables, durable or not.
	published atomic.Pointer[memView]
	publishMu sync.Mutex
	// durableLSN is the LSN through which the log is durable: readers'
	// views see commits up to the lesser of it and published's asOf.
	durableLSN atomic.Uint64

	// Owned by the holder of the writer slot.
	logScratch     logScratch
	active         *memtable.Table
	lastLSN        uint64
	checkpointDone chan struct{} // closed when the running checkpoint ends; nil when none ran

	// checkpointingLSN is the LSN of the newest table a checkpoint has begun
	// to commit to the file, stored before the commit: a view newer than it
	// cannot meet a file ahead of its memory tables.
	checkpointingLSN atomic.Uint64

	failureMu sync.Mutex
	failure   error

	// checkpointFault, when set (by tests), is the error every checkpoint
	// returns instead of writing the file.
	checkpointFault atomic.Pointer[error]
}

// LogDirectory returns the log directory of the ledger file at path: named
// from the file's real path, with symbolic links resolved, so that every
// path to one file names one log. (A file reached through another hard link
// finds its log from what it records: see findLogDirectory.)
func LogDirectory(path string) string {
	if resolved, err := filepath.EvalSymlinks(path); err == nil {
		path = resolved
	}
	return path + LogDirectorySuffix
}

// openLog opens the file's log, replays what the file does not hold yet
// and, on a writable handle, checkpoints it right away, so that a recovered
// ledger is a plain file again before Open returns. The recovery rules are
// in the package documentation and docs/FORMAT.md.
func (b *Backend) openLog(opts Options) error {
	ident, err := b.readLogIdentity()
	if err != nil {
		return err
	}
	dir, exists, err := b.findLogDirectory(ident)
	if err != nil {
		return fmt.Errorf("open %s: %w", b.path, err)
	}
	if exists && !ident.open {
		// A log the file never recorded, with no record in it, is one whose
		// creation stopped before the file recorded it.
		if exists, err = b.removeUnrecordedLog(dir, ident, opts); err != nil {
			return err
		}
	}
	if !exists {
		if ident.open {
			return b.missingLogError(ident, dir)
		}
		if opts.ReadOnly || opts.logOff() {
			return nil
		}
		checkpoint, err := b.checkpointLSN()
		if err != nil {
			return err
		}
		return b.startLog(opts, dir, checkpoint)
	}
	lg, err := wal.Open(dir, b.walOptions(opts, ident.id))
	if err != nil {
		return fmt.Errorf("open %s (log %s): %w", b.path, logName(ident.id), err)
	}
	replayed, last, err := b.replay(lg)
	if err != nil {
		lg.Close()
		return err
	}
	b.writer = make(chan struct{}, 1)
	b.lastLSN = last
	b.durableLSN.Store(last)
	if opts.ReadOnly {
		lg.Close()
		if !replayed.Empty() {
			b.overlay = true
			b.published.Store(&memView{tables: []*memtable.Table{replayed}, asOf: last})
		}
		return nil
	}
	if next := lg.NextLSN(); next != 0 && next != last+1 {
		lg.Close()
		return fmt.Errorf("open %s: %w: the log %s continues at LSN %d, the file at LSN %d", b.path, storage.ErrCorrupt, dir, next, last+1)
	}
	if !replayed.Empty() {
		if err := b.checkpoint(replayed); err != nil {
			// The failed bbolt transaction rolled back; the first of a
			// checkpoint's two may have committed whole commits, which the
			// next Open skips. The log is as it was, and an Open with room
			// for the checkpoint, or a read-only one, recovers every commit.
			lg.Close()
			if errors.Is(err, storage.ErrDuplicate) || errors.Is(err, storage.ErrCorrupt) {
				// The records contradict the file: not a log of its state.
				return fmt.Errorf("open %s: %w: the log %s holds commits that do not continue the file, and it is kept: %v",
					b.path, storage.ErrCorrupt, dir, err)
			}
			if !errors.Is(err, storage.ErrIO) {
				err = fmt.Errorf("%w: %w", storage.ErrIO, err)
			}
			return fmt.Errorf("open %s: the recovered log cannot be checkpointed into the file, and the log %s is kept: %w",
				b.path, dir, err)
		}
	}
	if lg.LastLSN() > 0 { // every record is in the file now, replayed or from before
		if err := lg.Release(last); err != nil {
			lg.Close()
			return fmt.Errorf("open %s: %w", b.path, err)
		}
	}
	if ident.id.IsZero() || opts.logOff() {
		// A log of an earlier version is replaced by one with an identity;
		// with the log off, none follows.
		if err := lg.Close(); err != nil {
			return fmt.Errorf("open %s: %w", b.path, err)
		}
		if err := lg.Remove(); err != nil {
			return fmt.Errorf("open %s: %w", b.path, err)
		}
		if opts.logOff() {
			if ident.open {
				return b.markLogClosed()
			}
			return nil
		}
		return b.startLog(opts, dir, last)
	}
	b.useLog(lg, dir, ident.id, last)
	b.logMarked = ident.open
	return nil
}

// walOptions are the options of the file's log.
func (b *Backend) walOptions(opts Options, id wal.ID) wal.Options {
	segment := opts.LogSegmentSizeBytes
	if segment == 0 {
		segment = LogSegmentSizeDefault
	}
	b.memtableBytesMax = opts.MemtableBytesMax
	if b.memtableBytesMax <= 0 {
		b.memtableBytesMax = MemtableBytesMaxDefault
	}
	return wal.Options{SegmentSizeBytes: segment, ReadOnly: opts.ReadOnly, ID: id,
		Spares: logSpares(b.memtableBytesMax, segment)}
}

// startLog creates a new log with a new identity, its first record to be
// checkpoint+1. The file records it at the first writable transaction
// (markLogOpen), before the log takes a record, so that an open that writes
// nothing commits nothing; a crash before that leaves an empty log the
// file does not name, which the next Open removes.
func (b *Backend) startLog(opts Options, dir string, checkpoint uint64) error {
	id := newLogID()
	walOpts := b.walOptions(opts, id)
	walOpts.Create = true
	walOpts.FirstLSN = checkpoint + 1
	lg, err := wal.Open(dir, walOpts)
	if err != nil {
		return fmt.Errorf("open %s: %w", b.path, err)
	}
	b.writer = make(chan struct{}, 1)
	b.lastLSN = checkpoint
	b.durableLSN.Store(checkpoint)
	b.useLog(lg, dir, id, checkpoint)
	return nil
}

// useLog makes lg the log commits go to.
func (b *Backend) useLog(lg *wal.Log, dir string, id wal.ID, last uint64) {
	b.log = lg
	b.logDir = dir
	b.logID = id
	b.overlay = true
	b.active = memtable.New()
	b.published.Store(&memView{tables: []*memtable.Table{b.active}, asOf: last})
}

// removeUnrecordedLog handles a log folder beside a file that was closed
// cleanly: one of the file's own log (a clean close that stopped before it
// removed the folder) is kept and opened; one whose segments name another
// log and hold no record is a creation that stopped before the file
// recorded it, removed (a writable open) or ignored (a read-only one). A
// foreign log that holds records is never skipped: the open fails. It
// returns whether the folder is still there.
func (b *Backend) removeUnrecordedLog(dir string, ident logIdentity, opts Options) (bool, error) {
	if segments, err := filepath.Glob(filepath.Join(dir, "*.wal")); err == nil && len(segments) == 0 {
		// No segment: a log that never took a record. What else is there
		// is the log's (spares) or refused by its open.
		if opts.ReadOnly {
			return false, nil
		}
		lg, err := wal.Open(dir, wal.Options{ID: ident.id, Create: !ident.id.IsZero(), FirstLSN: 1})
		if err != nil {
			return true, fmt.Errorf("open %s: %w", b.path, err)
		}
		lg.Close()
		if err := lg.Remove(); err != nil {
			return true, fmt.Errorf("open %s: %w", b.path, err)
		}
		return false, nil
	}
	probe, err := wal.Open(dir, wal.Options{ReadOnly: true, ID: ident.id})
	if err == nil {
		probe.Close()
		return true, nil
	}
	var foreign *wal.ForeignSegmentError
	if !errors.As(err, &foreign) || foreign.Found.IsZero() {
		return true, nil // the open proper reports it
	}
	other, err := wal.Open(dir, wal.Options{ReadOnly: opts.ReadOnly, ID: foreign.Found})
	if err != nil || other.LastLSN() != 0 {
		if other != nil {
			other.Close()
		}
		return true, nil // the open proper reports the foreign segment
	}
	other.Close()
	if opts.ReadOnly {
		return false, nil
	}
	if err := other.Remove(); err != nil {
		return true, fmt.Errorf("open %s: %w", b.path, err)
	}
	return false, nil
}

// logName names a log identity in messages.
func logName(id wal.ID) string {
	if id.IsZero() {
		return "of an earlier version"
	}
	return id.String()
}

// replay reads the records past the file's checkpoint into a memory table.
func (b *Backend) replay(lg *wal.Log) (*memtable.Table, uint64, error) {
	checkpoint, err := b.checkpointLSN()
	if err != nil {
		return nil, 0, err
	}
	m := memtable.New()
	if lg.LastLSN() == 0 {
		return m, checkpoint, nil
	}
	if lg.LastLSN() < checkpoint || lg.FirstLSN() > checkpoint+1 {
		return nil, 0, fmt.Errorf("open %s: %w: the log holds LSNs %d to %d, the file is checkpointed through %d",
			b.path, storage.ErrCorrupt, lg.FirstLSN(), lg.LastLSN(), checkpoint)
	}
	expected := checkpoint + 1
	for rec, err := range lg.Records(checkpoint) {
		if err != nil {
			return nil, 0, fmt.Errorf("open %s: %w", b.path, err)
		}
		if rec.LSN != expected {
			return nil, 0, fmt.Errorf("open %s: %w: log record %d where %d was expected", b.path, storage.ErrCorrupt, rec.LSN, expected)
		}
		expected++
		payload := slices.Clone(rec.Payload)
		operations, err := commitrec.Decode(payload)
		if err != nil {
			return nil, 0, fmt.Errorf("open %s: log record %d: %w", b.path, rec.LSN, err)
		}
		if err := m.Check(operations); err != nil {
			return nil, 0, fmt.Errorf("open %s: log record %d: %w", b.path, rec.LSN, err)
		}
		m.Apply(rec.LSN, payload, operations)
	}
	return m, max(checkpoint, lg.LastLSN()), nil
}

// checkpointLSN reads meta/checkpoint_lsn.
func (b *Backend) checkpointLSN() (lsn uint64, err error) {
	defer func(fault bool) {
		debug.SetPanicOnFault(fault)
		if p := recover(); p != nil {
			err = fmt.Errorf("open %w", damagedError(b.path, p))
		}
	}(debug.SetPanicOnFault(true))
	err = b.db.View(func(btx *bbolt.Tx) error {
		lsn, err = readCheckpointLSN(b.path, btx)
		return err
	})
	return lsn, err
}

func readCheckpointLSN(path string, btx *bbolt.Tx) (uint64, error) {
	v := btx.Bucket(BucketMeta).Get(metaCheckpointLSN)
	switch len(v) {
	case 0:
		return 0, nil
	case 8:
		return binary.BigEndian.Uint64(v), nil
	}
	return 0, fmt.Errorf("%s: %w: checkpoint_lsn of %d bytes", path, storage.ErrCorrupt, len(v))
}

// acquireWriter takes the writer slot, or gives up when ctx ends.
func (b *Backend) acquireWriter(ctx context.Context) error {
	select {
	case b.writer <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (b *Backend) releaseWriter() { <-b.writer }

// failed returns the error that stopped the log, if any.
func (b *Backend) failed() error {
	b.failureMu.Lock()
	defer b.failureMu.Unlock()
	return b.failure
}

func (b *Backend) fail(err error) {
	b.failureMu.Lock()
	defer b.failureMu.Unlock()
	if b.failure == nil {
		b.failure = err
	}
}

func (b *Backend) publish(update func(v *memView)) {
	b.publishMu.Lock()
	defer b.publishMu.Unlock()
	v := *b.published.Load()
	v.tables = slices.Clone(v.tables)
	update(&v)
	b.published.Store(&v)
}

// beginView takes the memory tables of the last published commit and a
// bbolt read transaction that holds no commit past it. The tables are taken
// first: a checkpoint commits the file before it drops a table, so the
// file the view then opens may hold a table the view also holds (the reads
// take each item once), never less. It may hold more only when a whole
// checkpoint committed in between; then the view is taken again.
//
// A writer's view sees every applied commit; a reader's sees only the
// durable ones. Checkpoints write durable commits only, so a reader's view
// is never older than the file's checkpoint for long.
func (b *Backend) beginView(writable bool) (*memView, *tx, error) {
	for {
		v := b.published.Load()
		if durable := b.durableLSN.Load(); !writable && durable < v.asOf {
			v = &memView{tables: v.tables, asOf: durable}
		}
		t, err := b.beginFileRead()
		if err != nil {
			return nil, nil, err
		}
		if b.checkpointingLSN.Load() <= v.asOf {
			return v, t, nil
		}
		checkpoint, err := b.guardedCheckpointLSN(t.tx)
		if err != nil {
			t.tx.Rollback()
			return nil, nil, err
		}
		if checkpoint <= v.asOf {
			return v, t, nil
		}
		t.tx.Rollback()
	}
}

// beginFileRead returns a read transaction of the file: an idle one of the
// pool (which reads the file's last commit) or a new one.
func (b *Backend) beginFileRead() (*tx, error) {
	if t := b.readers.Take(); t != nil {
		return t, nil
	}
	btx, err := b.beginBolt(false)
	if err != nil {
		return nil, err
	}
	return &tx{tx: btx, path: b.path, cache: b.cache}, nil
}

func (b *Backend) guardedCheckpointLSN(btx *bbolt.Tx) (lsn uint64, err error) {
	defer func(fault bool) {
		debug.SetPanicOnFault(fault)
		if p := recover(); p != nil {
			err = damagedError(b.path, p)
		}
	}(debug.SetPanicOnFault(true))
	return readCheckpointLSN(b.path, btx)
}

// logSpares is how many released segments the log keeps for reuse: as many
// as one memory table's records fill, and two more. A checkpoint releases a
// table's segments at once, and the next table fills as many again; a
// segment not recycled is zero-filled anew, a second write of every byte
// the log takes (with the defaults 3 spares, 24 MiB of disk).
func logSpares(memtableBytesMax, segmentSizeBytes int64) int {
	return int(min(wal.SparesMax, memtableBytesMax/segmentSizeBytes+2))
}

// beginLogged starts a transaction of a backend that runs the log.
func (b *Backend) beginLogged(ctx context.Context, writable bool) (storage.Tx, error) {
	if writable {
		if b.log == nil {
			return nil, fmt.Errorf("begin %s: %w", b.path, storage.ErrReadOnly)
		}
		if err := b.acquireWriter(ctx); err != nil {
			return nil, err
		}
		if b.closed.Load() {
			b.releaseWriter()
			return nil, storage.ErrClosed
		}
		if err := b.freezeWhenFull(ctx); err != nil {
			b.releaseWriter()
			return nil, err
		}
	}
	v, ft, err := b.beginView(writable)
	if err != nil {
		if writable {
			b.releaseWriter()
		}
		return nil, err
	}
	t := &logTx{b: b, view: v, base: &guardedTx{t: ft}, writable: writable}
	if writable {
		t.takeScratch()
	}
	return t, nil
}

// freezeWhenFull starts a checkpoint of the active table once it holds
// MemtableBytesMax, after the previous checkpoint has ended (at most two
// tables exist: the writer waits here for the older one, which is the
// backpressure of a log that outruns the file). It runs while the writer
// holds no bbolt transaction: a checkpoint's commit may wait for every read
// transaction to end when bbolt grows its memory map.
func (b *Backend) freezeWhenFull(ctx context.Context) error {
	if err := b.failed(); err != nil {
		return err
	}
	if b.active.Size() < b.memtableBytesMax {
		return nil
	}
	if err := b.waitCheckpoint(ctx); err != nil {
		return err
	}
	if err := b.failed(); err != nil {
		return err
	}
	if err := b.log.Rotate(); err != nil {
		err = fmt.Errorf("rotate the log of %s: %w", b.path, err)
		b.fail(err)
		return err
	}
	frozen := b.active
	b.active = memtable.New()
	b.publish(func(v *memView) { v.tables = append([]*memtable.Table{b.active}, v.tables...) })
	done := make(chan struct{})
	b.checkpointDone = done
	go func() {
		defer close(done)
		b.checkpointAndRelease(frozen)
	}()
	return nil
}

// waitCheckpoint waits for the running checkpoint, if any.
func (b *Backend) waitCheckpoint(ctx context.Context) error {
	if b.checkpointDone == nil {
		return nil
	}
	select {
	case <-b.checkpointDone:
		b.checkpointDone = nil
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// checkpointAndRelease applies a frozen table to the file, drops it from
// the view and releases its log records. A failure stops the log: later
// commits return it, and the next Open recovers from the log.
func (b *Backend) checkpointAndRelease(m *memtable.Table) {
	// The frozen table may end with commits not yet durable: the file
	// takes durable commits only.
	if err := b.syncThrough(m.LastLSN()); err != nil {
		return
	}
	if err := b.checkpoint(m); err != nil {
		if !errors.Is(err, storage.ErrIO) { // a refusal of the file's own write path
			err = fmt.Errorf("%w: %w", storage.ErrIO, err)
		}
		b.fail(err)
		return
	}
	b.publish(func(v *memView) {
		v.tables = slices.DeleteFunc(v.tables, func(t *memtable.Table) bool { return t == m })
	})
	if err := b.log.Release(m.LastLSN()); err != nil {
		b.fail(fmt.Errorf("release the log of %s: %w", b.path, err))
	}
}

// checkpoint applies a memory table to the file, through the same writes a
// transaction without the log makes (heads, the key index with its runs and
// filter, state), and records the LSN it covers in meta/checkpoint_lsn in
// the same bbolt transaction. It takes two bbolt transactions when the
// table holds several commits: every commit but the last, then the last.
// bbolt keeps the two newest meta pages, and when the newest is damaged it
// opens the file as of the other; that file then lacks only the last
// commit, as it would without the log, not the whole table.
func (b *Backend) checkpoint(m *memtable.Table) error {
	if m.FirstLSN() < m.LastLSN() {
		if err := b.checkpointRange(m, 0, m.LastLSN()-1); err != nil {
			return err
		}
		return b.checkpointRange(m, m.LastLSN()-1, m.LastLSN())
	}
	return b.checkpointRange(m, 0, m.LastLSN())
}

// checkpointRange writes the table's commits with after < LSN <= through
// in one bbolt transaction.
func (b *Backend) checkpointRange(m *memtable.Table, after, through uint64) error {
	if fault := b.checkpointFault.Load(); fault != nil {
		return *fault
	}
	btx, err := b.beginBolt(true)
	if err != nil {
		return err
	}
	// Every key of the table was proven new by the log commit that
	// recorded it, against everything committed before it.
	t := &tx{tx: btx, path: b.path, cache: b.cache, scratch: &b.scratch, keysProvenNew: true, readers: &b.readers}
	if s := b.scratch.Swap(nil); s != nil {
		t.index.pending, t.index.records = s.pending, s.records[:0]
	}
	g := &guardedTx{t: t}
	if err := b.writeCheckpoint(g, m, after, through); err != nil {
		g.Rollback()
		return fmt.Errorf("checkpoint %s: %w", b.path, err)
	}
	if b.checkpointingLSN.Load() < through {
		b.checkpointingLSN.Store(through)
	}
	if err := g.Commit(); err != nil {
		return fmt.Errorf("checkpoint %s: %w", b.path, err)
	}
	return nil
}

func (b *Backend) writeCheckpoint(g *guardedTx, m *memtable.Table, after, through uint64) error {
	ctx := context.Background()
	var digests checkpointDigests
	err := m.Walk(through, func(name string, entries []memtable.Entry) error {
		for len(entries) > 0 {
			batch := entries[:min(len(entries), checkpointDigestBatch)]
			entries = entries[len(batch):]
			digests.digest(batch)
			for i, e := range batch {
				if e.LSN <= after || e.LSN > through {
					continue
				}
				if e.Key != "" {
					g.t.nextKeyDigest = &digests.out[i]
				}
				rec := storage.Record{Seq: e.Seq, IdempotencyKey: e.Key, Data: e.Data}
				if err := g.Append(ctx, name, rec, e.Head); err != nil {
					return err
				}
			}
		}
		return nil
	}, func(key string, v memtable.StateVersion) error {
		if v.LSN <= after {
			return nil
		}
		// The key is read in place: bbolt copies the keys it keeps.
		k := unsafe.Slice(unsafe.StringData(key), len(key))
		if v.Deleted {
			return g.StateDelete(ctx, k)
		}
		return g.StatePut(ctx, k, v.Value)
	})
	if err != nil {
		return err
	}
	if b.closingCheckpoint {
		if err := g.putMeta(metaLogState, []byte(logStateClosed)); err != nil {
			return err
		}
	}
	return g.putMeta(metaCheckpointLSN, binary.BigEndian.AppendUint64(nil, through))
}

// checkpointDigestBatch is how many entries a checkpoint digests the keys
// of at once.
const checkpointDigestBatch = 256

// checkpointDigests computes the key digests of a checkpoint's entries in
// batches: the log commit looked each key up already, but the digest, which
// the file's index stores, costs as much again one by one.
type checkpointDigests struct {
	digester storage.KeyDigester
	keys     []string
	out      [][KeyDigestSize]byte
}

// digest sets out[i] to the digest of batch[i]'s key (empty keys too, which
// are not used).
func (c *checkpointDigests) digest(batch []memtable.Entry) {
	c.keys = c.keys[:0]
	for i := range batch {
		c.keys = append(c.keys, batch[i].Key)
	}
	if cap(c.out) < len(batch) {
		c.out = make([][KeyDigestSize]byte, checkpointDigestBatch)
	}
	c.out = c.out[:len(batch)]
	c.digester.Digest(c.out, c.keys)
}

// putMeta writes a key of the meta bucket under recover.
func (g *guardedTx) putMeta(key, value []byte) (err error) {
	defer g.guard(&err, debug.SetPanicOnFault(true))
	if err := g.t.meta().Put(key, value); err != nil {
		return g.t.writeError(err)
	}
	return nil
}

// commitNoSync appends one record of operations to the log without
// waiting for it to be durable, applies the operations (pointed into the
// record, so not decoded again) to the active table and
// publishes it to writers; syncThrough publishes it to readers. The caller
// holds the writer slot.
func (b *Backend) commitNoSync(operations []commitrec.Operation, size int) (uint64, error) {
	if err := b.failed(); err != nil {
		return 0, err
	}
	record := commitrec.EncodeAliased(make([]byte, 0, size), operations)
	lsn := b.lastLSN + 1
	if !b.logMarked {
		if err := b.markLogOpenFirst(lsn); err != nil {
			return 0, err
		}
	}
	if err := b.log.AppendNoSync(lsn, record); err != nil {
		err = fmt.Errorf("commit %s: %w", b.path, err)
		if errors.Is(err, wal.ErrUnusable) {
			b.fail(err)
		}
		// Otherwise the log refused the record before writing any of it
		// (no room for a new segment): this commit fails, the next tries.
		return 0, err
	}
	b.lastLSN = lsn
	b.active.Apply(lsn, record, operations)
	b.publish(func(v *memView) { v.asOf = lsn })
	return lsn, nil
}

// markLogOpenFirst runs before the first record of a handle's log: the log
// gets its first segment (naming its identity), then the file records that
// the log is open, so that from then on it says it was not closed cleanly
// until a close checkpoints everything. The writer holds no bbolt
// transaction here (CommitAsync ended its view's).
func (b *Backend) markLogOpenFirst(lsn uint64) error {
	if err := b.log.Prepare(lsn); err != nil {
		err = fmt.Errorf("commit %s: %w", b.path, err)
		if errors.Is(err, wal.ErrUnusable) {
			b.fail(err)
		}
		return err
	}
	if err := b.markLogOpen(b.logID, b.logDir); err != nil {
		return fmt.Errorf("commit %s: %w", b.path, err)
	}
	b.logMarked = true
	return nil
}

// syncThrough makes the log durable through lsn (a group sync: one
// fdatasync covers every commit written before it) and publishes the
// durable LSN to readers. A failure stops the backend: this and every later
// commit fail, and the next Open recovers what was durable.
func (b *Backend) syncThrough(lsn uint64) error {
	durable, err := b.log.Sync(lsn)
	for {
		current := b.durableLSN.Load()
		if durable <= current || b.durableLSN.CompareAndSwap(current, durable) {
			break
		}
	}
	if err != nil {
		err = fmt.Errorf("commit %s: %w", b.path, err)
		b.fail(err)
		return err
	}
	return nil
}

// closeLog checkpoints what the memory holds, closes the log and removes
// it: a cleanly closed ledger is its bbolt file alone. The caller has
// marked the backend closed.
func (b *Backend) closeLog() error {
	b.writer <- struct{}{}
	defer b.releaseWriter()
	_ = b.waitCheckpoint(context.Background())
	err := b.failed()
	if err == nil && !b.active.Empty() {
		err = b.syncThrough(b.active.LastLSN())
	}
	// The final checkpoint records that the file is closed in each of its
	// bbolt transactions: when the newest meta page is damaged, bbolt opens
	// the file as of the transaction before, which then says so too and
	// lacks at most the last commit, as a file without the log would.
	// Written early, the mark is harmless: a log that is still there is
	// replayed whatever the file says.
	checkpointed := false
	if err == nil && !b.active.Empty() {
		b.closingCheckpoint = b.logMarked
		err = b.checkpoint(b.active)
		b.closingCheckpoint = false
		checkpointed = err == nil
		if err == nil {
			err = b.log.Release(b.active.LastLSN())
		}
	}
	if closeErr := b.log.Close(); err == nil && closeErr != nil {
		err = fmt.Errorf("close %s: %w", b.path, closeErr)
	}
	if err == nil && b.logMarked && !checkpointed {
		err = b.markLogClosed()
	}
	if err != nil {
		// The log stays: nothing acknowledged is lost, and the next Open
		// recovers from it.
		if !errors.Is(err, storage.ErrIO) {
			err = fmt.Errorf("%w: %w", storage.ErrIO, err)
		}
		return fmt.Errorf("close %s: the log %s is kept with every acknowledged commit, and the next Open checkpoints it: %w",
			b.path, b.logDir, err)
	}
	if err := b.log.Remove(); err != nil {
		// The file holds every commit and says so: what is left of the
		// folder is clutter, not the outcome of the commits.
		b.logger.Warn("bolt: the log folder of a cleanly closed ledger could not be removed",
			"path", b.path, "log", b.logDir, "error", err)
	}
	return nil
}

// forceCheckpoint freezes the active table, when it holds anything, and
// waits until it is in the file; tests use it to put the boundary between
// file and memory where they want it.
func (b *Backend) forceCheckpoint(ctx context.Context) error {
	if b.log == nil {
		return nil
	}
	if err := b.acquireWriter(ctx); err != nil {
		return err
	}
	defer b.releaseWriter()
	return b.checkpointAll(ctx)
}

// abandon closes the handle as a crash would leave it: the log is closed
// without a checkpoint, and nothing more reaches the file.
func (b *Backend) abandon() {
	if b.closed.Swap(true) {
		return
	}
	if b.log != nil {
		b.writer <- struct{}{}
		_ = b.waitCheckpoint(context.Background())
		b.log.Close()
	}
	b.readers.Close()
	b.db.Close()
}
