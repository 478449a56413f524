package bolt

import (
	"cmp"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"

	"os"
	"strconv"
	"sync/atomic"
	"time"

	bbolt "go.etcd.io/bbolt"
	bbolterrors "go.etcd.io/bbolt/errors"

	"github.com/ledgerworks/ledger/storage"
	"github.com/ledgerworks/ledger/storage/bolt/internal/keyrun"
	"github.com/ledgerworks/ledger/storage/bolt/internal/readpool"
)

// Format is the value of meta/format in every file this package writes.
// Files of the earlier formats are read as they are and upgraded when
// opened for writing (upgrade.go).
const Format = "ledger/bolt/v3"

// FormatV2 is the layout before entry segments: one value per entry in
// the entries bucket.
const FormatV2 = "ledger/bolt/v2"

// FormatV1 is the layout before the key runs: every idempotency key in the
// keys B-tree (and one value per entry).
const FormatV1 = "ledger/bolt/v1"

// LockTimeoutDefault is how long Open waits for another process's lock when
// Options.LockTimeout is zero.
const LockTimeoutDefault = 10 * time.Second

// FileMode is the permission of a newly created ledger file: the ledger holds
// business records, so only its owner may read it.
const FileMode os.FileMode = 0o600

// Bucket names of the file layout (see the package documentation).
var (
	BucketMeta   = []byte("meta")
	BucketChains = []byte("chains")
	// BucketSegments holds the entries, in segments (internal/segment).
	BucketSegments = []byte("entry_segments")
	// BucketEntries held the entries, one value each, before FormatV3.
	BucketEntries = []byte("entries")
	BucketKeys    = []byte("keys")
	BucketState   = []byte("state")
	// BucketKeyRuns holds the sorted runs of the idempotency index.
	BucketKeyRuns = []byte("key_runs")
	// BucketKeyMerge holds the merge of key runs in progress, if any.
	BucketKeyMerge = keyrun.MergeBucket
)

var (
	metaFormat      = []byte("format")
	metaNextChainID = []byte("next_chain_id")
	metaRecentKeys  = keyrun.RecentCountKey
)

// chainValueSize is the size of a value in the chains bucket.
const chainValueSize = 8 + 8 + storage.HashSize + 8

// Options configure Open.
type Options struct {
	// LockTimeout bounds the wait for another process's file lock.
	// Zero means LockTimeoutDefault; a negative value means do not wait.
	LockTimeout time.Duration
	// ReadOnly opens the file for reading only, under a shared lock.
	// The file must exist.
	ReadOnly bool
	// InitialMmapSize is passed to bbolt; a larger map avoids remapping
	// (which waits for every read transaction) as the file grows.
	InitialMmapSize int
	// Log selects how commits reach the file: through the write-ahead log
	// (LogOn) or straight to the bbolt file, a bbolt commit with its two
	// fdatasyncs each (LogOff); LogDefault is LogModeDefault. A log left
	// by a crash is replayed at Open whatever the mode.
	Log LogMode
	// MemtableBytesMax bounds the memory of the active memory table;
	// MemtableBytesMaxDefault when zero. When it is full the next writable
	// transaction freezes it and a checkpoint writes it to the file.
	MemtableBytesMax int64
	// LogSegmentSizeBytes is the size of a log segment;
	// LogSegmentSizeDefault when zero.
	LogSegmentSizeBytes int64
	// EntryKey returns the idempotency key held in an entry's stored bytes
	// (ok false when it finds none); the backend stores entries as opaque
	// bytes, and chain.Open passes its record format's. With it, a
	// writable handle keeps a seq map beside its key filter, and a replay
	// (ReadKey) reads the entry the map names and confirms it by this key,
	// instead of searching the key runs: see seqMap. Without it, or on a
	// read-only handle, there is no map.
	EntryKey func(entry []byte) (key []byte, ok bool)
	// SeqMapBytesMax bounds the seq map's memory, 10 to 30 bytes per key
	// of the file; SeqMapBytesMaxDefault when zero, none when negative. A
	// map that reaches it holds what it can, and the keys it lacks are read
	// through the key runs; a file whose keys would fill more than 80% of
	// a map of that size (26,800,000 keys under the default) has none.
	// MemoryBytesMax may leave it less (see the package documentation,
	// "Memory").
	SeqMapBytesMax int64
	// MemoryBytesMax bounds the memory a writable handle keeps apart from
	// the file's map, whatever the ledger's size: the memory tables, the key
	// index's filters and seq map, the merges of key runs, and what the Go
	// heap adds to them before it collects (GOGC as the runtime has it when
	// Open runs) and keeps mapped after. When zero, MemoryBytesMaxDefault,
	// or 16 times MemtableBytesMax when that is larger; negative, no bound
	// but the others. At least MemoryBytesMin, and at least 16 times
	// MemtableBytesMax, which is at most MemoryBytesMax/16 when zero; Open
	// returns ErrMemoryBound otherwise.
	// Under it, the filter and the seq map are built smaller as the file's
	// keys grow (see the package documentation, "Memory").
	MemoryBytesMax int64
	// Logger receives the warnings of what does not change an outcome (a
	// log folder a clean close could not remove); slog.Default() when nil.
	Logger *slog.Logger
}

// Backend is a ledger stored in one bbolt file.
type Backend struct {
	db     *bbolt.DB
	path   string
	closed atomic.Bool
	cache  *runCache
	// readers keeps the bbolt read transactions of a handle that runs the
	// log for its next transactions (internal/readpool).
	readers readpool.Pool[*tx]
	// scratch is the memory of the last write transaction, reused by the
	// next: a batch of a thousand keys would otherwise grow a map and a
	// slice from nothing. Swapped atomically: a transaction hands it back
	// after bbolt let the next writer begin.
	scratch atomic.Pointer[writeScratch]
	// overlay is set when transactions read through memory tables: the log
	// is on, or a read-only handle replayed a log a crash left behind.
	overlay bool
	// entryKey is Options.EntryKey, or what UseEntryKey set.
	entryKey func(entry []byte) (key []byte, ok bool)
	// seqMapBytesMax is Options.SeqMapBytesMax.
	seqMapBytesMax int64
	// logger is Options.Logger, or slog.Default().
	logger *slog.Logger
	logState
}

// writeScratch is what a write transaction's index keeps in memory.
type writeScratch struct {
	pending map[pendingKey]uint64
	records []byte
}

// scratchKeysMax bounds the keys whose memory is kept for the next write
// transaction, so that one huge import does not pin its memory.
const scratchKeysMax = 1 << 16

var (
	_ storage.Backend      = (*Backend)(nil)
	_ storage.EntryKeyUser = (*Backend)(nil)
)

// Open opens or creates the ledger file at path.
func Open(path string, opts Options) (*Backend, error) {
	opts, err := resolveMemory(opts)
	if err != nil {
		return nil, err
	}
	b, err := openFile(path, opts)
	if err != nil {
		return nil, err
	}
	if err := b.openLog(opts); err != nil {
		b.db.Close()
		return nil, err
	}
	b.prepareProbe(opts.ReadOnly)
	if b.overlay {
		b.readers.Start(b.db)
	}
	return b, nil
}

// openFile opens (or creates) the bbolt file and checks its format, the log
// left alone.
func openFile(path string, opts Options) (*Backend, error) {
	opts, err := resolveMemory(opts)
	if err != nil {
		return nil, err
	}
	if opts.ReadOnly {
		if _, err := os.Stat(path); err != nil {
			return nil, fmt.Errorf("open %s: %w", path, storage.ErrNotFound)
		}
	}
	timeout := opts.LockTimeout
	switch {
	case timeout == 0:
		timeout = LockTimeoutDefault
	case timeout < 0:
		timeout = time.Nanosecond
	}
	bopts := BboltOptions(opts)
	bopts.Timeout = timeout
	logMap := !opts.logOff() && !opts.ReadOnly && opts.InitialMmapSize == 0 && strconv.IntSize == 64
	if logMap {
		bopts.InitialMmapSize = LogInitialMmapSizeDefault
	}
	if !opts.ReadOnly {
		if err := createNew(path, bopts); err != nil {
			return nil, err
		}
	}
	if err := walkExisting(path, bopts); err != nil {
		return nil, openError(path, err)
	}
	db, err := openGuarded(path, bopts)
	if err != nil {
		return nil, openError(path, err)
	}
	if logMap {
		// bbolt grows a file in steps of AllocSize once its map is larger;
		// with the log only checkpoints grow it, so it grows exactly.
		db.AllocSize = 0
	}
	b := &Backend{db: db, path: path, cache: newRunCache(), seqMapBytesMax: opts.SeqMapBytesMax, logger: cmp.Or(opts.Logger, slog.Default())}
	b.cache.memory = newMemoryBudget(opts, db.Info().PageSize)
	b.cache.runs.MergeRecordsMax = b.cache.memory.mergeRecordsMax()
	b.cache.runs.RunRecordsMax = b.cache.memory.runRecordsMax()
	b.setEntryKey(opts.EntryKey)
	if err := b.prepareGuarded(opts.ReadOnly); err != nil {
		db.Close()
		return nil, err
	}
	return b, nil
}

// setEntryKey sets the function that confirms a seq map's candidates, and
// with it, on a writable handle, the bound of the maps built from then on.
// It runs before the handle is in use (Open, UseEntryKey), so the fields
// it sets are read without a lock.
func (b *Backend) setEntryKey(entryKey func(entry []byte) (key []byte, ok bool)) {
	b.entryKey = entryKey
	if entryKey != nil && !b.db.IsReadOnly() {
		b.cache.seqMapBytesMax = cmp.Or(b.seqMapBytesMax, SeqMapBytesMaxDefault)
	}
}

// UseEntryKey gives a handle opened without Options.EntryKey the function
// that reads the key an entry holds, and builds the key filter again, now
// with a seq map (see seqMap). chain.OpenBackend calls it, so that a
// backend opened by hand gets the map that chain.Open's has. It must be
// called before any other call of the handle; a handle that has an
// EntryKey already keeps it.
func (b *Backend) UseEntryKey(entryKey func(entry []byte) (key []byte, ok bool)) {
	if b.entryKey != nil || entryKey == nil {
		return
	}
	b.setEntryKey(entryKey)
	if b.db.IsReadOnly() || b.cache.seqMapBytesMax < 0 {
		return
	}
	b.cache.dropFilter()
	b.prepareProbe(false)
}

// BboltOptions returns the bbolt options Open uses for opts (without the
// lock timeout), so that a raw bbolt baseline can be measured on the same
// footing as the backend.
func BboltOptions(opts Options) *bbolt.Options {
	return &bbolt.Options{
		ReadOnly:        opts.ReadOnly,
		FreelistType:    bbolt.FreelistMapType,
		NoFreelistSync:  true,
		InitialMmapSize: opts.InitialMmapSize,
	}
}

func openError(path string, err error) error {
	switch {
	case errors.Is(err, storage.ErrCorrupt), errors.Is(err, storage.ErrLocked):
		return err
	case errors.Is(err, bbolterrors.ErrTimeout):
		return fmt.Errorf("open %s: %w (another process holds the file)", path, storage.ErrLocked)
	case errors.Is(err, bbolterrors.ErrInvalid), errors.Is(err, bbolterrors.ErrVersionMismatch),
		errors.Is(err, bbolterrors.ErrChecksum), errors.Is(err, bbolterrors.ErrInvalidMapping):
		return fmt.Errorf("open %s: %w: %v", path, storage.ErrCorrupt, err)
	}
	return fmt.Errorf("open %s: %w: %v", path, storage.ErrIO, err)
}

// prepare creates the buckets of a new file and checks the format of an
// existing one.
func (b *Backend) prepare(readOnly bool) error {
	check := func(tx *bbolt.Tx) error {
		meta := tx.Bucket(BucketMeta)
		if meta == nil {
			return fmt.Errorf("open %s: %w: not a ledger file (no meta bucket)", b.path, storage.ErrCorrupt)
		}
		got := string(meta.Get(metaFormat))
		if got != Format && got != FormatV2 && got != FormatV1 {
			return fmt.Errorf("open %s: %w: format %q, want %q", b.path, storage.ErrCorrupt, got, Format)
		}
		entries := BucketSegments
		if got != Format {
			entries = BucketEntries
		}
		for _, name := range [][]byte{BucketChains, entries, BucketKeys, BucketState} {
			if tx.Bucket(name) == nil {
				return fmt.Errorf("open %s: %w: bucket %q missing", b.path, storage.ErrCorrupt, name)
			}
		}
		return nil
	}
	if readOnly {
		return b.db.View(check)
	}
	// A current file needs no write: a read transaction checks it without
	// the commit, and the fsync, of a write transaction.
	current := false
	if err := b.db.View(func(tx *bbolt.Tx) error {
		current = tx.Bucket(BucketMeta) != nil && string(tx.Bucket(BucketMeta).Get(metaFormat)) == Format
		if current {
			return check(tx)
		}
		return nil
	}); err != nil || current {
		return err
	}
	created := false
	err := b.db.Update(func(tx *bbolt.Tx) error {
		if tx.Bucket(BucketMeta) == nil && isEmpty(tx) {
			created = true
			return create(tx)
		}
		if err := check(tx); err != nil {
			return err
		}
		return upgradeKeyRuns(tx)
	})
	if err != nil || created {
		return err
	}
	return upgradeEntries(b.db)
}

func isEmpty(tx *bbolt.Tx) bool {
	empty := true
	_ = tx.ForEach(func([]byte, *bbolt.Bucket) error { empty = false; return storage.ErrStop })
	return empty
}

func create(tx *bbolt.Tx) error {
	meta, err := tx.CreateBucket(BucketMeta)
	if err != nil {
		return err
	}
	if err := meta.Put(metaFormat, []byte(Format)); err != nil {
		return err
	}
	if err := meta.Put(metaNextChainID, binary.BigEndian.AppendUint64(nil, 1)); err != nil {
		return err
	}
	for _, name := range [][]byte{BucketChains, BucketSegments, BucketKeys, BucketState, BucketKeyRuns} {
		if _, err := tx.CreateBucket(name); err != nil {
			return err
		}
	}
	return nil
}

// Name returns the file path.
func (b *Backend) Name() string { return b.path }

// Path returns the file path.
func (b *Backend) Path() string { return b.path }

// Close closes the file and releases its lock. Closing twice is not an error.
func (b *Backend) Close() error {
	if b.closed.Swap(true) {
		return nil
	}
	var logErr error
	if b.log != nil {
		logErr = b.closeLog()
	}
	b.readers.Close()
	if err := b.db.Close(); err != nil {
		return fmt.Errorf("close %s: %w: %v", b.path, storage.ErrIO, err)
	}
	return logErr
}

// Stats reports the file size.
func (b *Backend) Stats(ctx context.Context) (storage.Stats, error) {
	info, err := os.Stat(b.path)
	if err != nil {
		return storage.Stats{}, fmt.Errorf("stat %s: %w: %v", b.path, storage.ErrIO, err)
	}
	size := info.Size()
	if b.log != nil {
		size += b.log.SizeBytes()
	}
	return storage.Stats{SizeBytes: size}, nil
}

// Check runs bbolt's consistency check of the file's pages and returns the
// first problem it finds.
func (b *Backend) Check() error {
	// bbolt's check first rebuilds the freelist on a goroutine where a
	// damaged page's panic cannot be recovered: the walk meets it first.
	if err := walkView(b.path, b.db); err != nil {
		return err
	}
	return b.db.View(func(tx *bbolt.Tx) error {
		var first error
		for err := range tx.Check() { // drained: the checker goroutine blocks until read
			if first == nil {
				first = fmt.Errorf("check %s: %w: %v", b.path, storage.ErrCorrupt, err)
			}
		}
		return first
	})
}

// Begin starts a transaction: with the log on, one that reads through the
// memory tables and commits to the log (logTx); without, a bbolt
// transaction.
func (b *Backend) Begin(ctx context.Context, writable bool) (storage.Tx, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if b.overlay {
		return b.beginLogged(ctx, writable)
	}
	btx, err := b.beginBolt(writable)
	if err != nil {
		return nil, err
	}
	t := &tx{tx: btx, path: b.path, cache: b.cache}
	if writable {
		t.readers = &b.readers
		t.scratch = &b.scratch
		if s := b.scratch.Swap(nil); s != nil {
			t.index.pending, t.index.records = s.pending, s.records[:0]
		}
	}
	return &guardedTx{t: t}, nil
}

// beginBolt begins a bbolt transaction.
// A writable one empties the pool of read transactions first (see
// internal/readpool); the caller's tx ends what this began (tx.readers).
func (b *Backend) beginBolt(writable bool) (*bbolt.Tx, error) {
	if writable {
		b.readers.BeginWrite()
	}
	btx, err := b.db.Begin(writable)
	if err != nil {
		if writable {
			b.readers.EndWrite(readpool.WriteRolledBack, 0)
		}
		switch {
		case errors.Is(err, bbolterrors.ErrDatabaseNotOpen):
			return nil, storage.ErrClosed
		case errors.Is(err, bbolterrors.ErrDatabaseReadOnly):
			return nil, fmt.Errorf("begin %s: %w", b.path, storage.ErrReadOnly)
		}
		return nil, fmt.Errorf("begin %s: %w: %v", b.path, storage.ErrIO, err)
	}
	return btx, nil
}

// ChainID returns the numeric id of a chain in an open bbolt transaction;
// tests use it to reach a chain's raw entries.
func ChainID(btx *bbolt.Tx, chain string) (uint64, error) {
	v := btx.Bucket(BucketChains).Get([]byte(chain))
	if v == nil {
		return 0, storage.ErrNotFound
	}
	if len(v) != chainValueSize {
		return 0, storage.ErrCorrupt
	}
	return binary.BigEndian.Uint64(v), nil
}

type chainRecord struct {
	id   uint64
	head storage.Head
}

func decodeChain(v []byte) (chainRecord, error) {
	if len(v) != chainValueSize {
		return chainRecord{}, fmt.Errorf("%w: chain record of %d bytes, want %d", storage.ErrCorrupt, len(v), chainValueSize)
	}
	var c chainRecord
	c.id = binary.BigEndian.Uint64(v[0:8])
	c.head.Seq = binary.BigEndian.Uint64(v[8:16])
	copy(c.head.Hash[:], v[16:48])
	c.head.TimeUnixNano = int64(binary.BigEndian.Uint64(v[48:56]))
	return c, nil
}

func encodeChain(c chainRecord) []byte {
	v := make([]byte, chainValueSize)
	binary.BigEndian.PutUint64(v[0:8], c.id)
	binary.BigEndian.PutUint64(v[8:16], c.head.Seq)
	copy(v[16:48], c.head.Hash[:])
	binary.BigEndian.PutUint64(v[48:56], uint64(c.head.TimeUnixNano))
	return v
}

func keyIndexKey(chainID uint64, key string) []byte { return keyrun.RecentKey(chainID, key) }

// View runs fn in a bbolt read transaction of the file; tests and tools use
// it to inspect the layout.
func (b *Backend) View(fn func(btx *bbolt.Tx) error) error { return b.db.View(fn) }
