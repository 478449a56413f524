package bolt

import (
	"encoding/binary"
	"sync"
	"sync/atomic"

	bbolt "go.etcd.io/bbolt"

	"github.com/ledgerworks/ledger/storage"
	"github.com/ledgerworks/ledger/storage/bolt/internal/keyindex"
	"github.com/ledgerworks/ledger/storage/bolt/internal/keyrun"
)

// The idempotency index has two parts (see the package documentation):
//
//   - recent keys, exact, in the B-tree of BucketKeys, which small
//     transactions write cheaply;
//   - immutable sorted runs of key digests in BucketKeyRuns, each with a
//     Bloom filter, written sequentially and merged by the committing
//     transaction when a level is full (size-tiered, KeyRunFanout runs per
//     level; internal/keyrun).
//
// A random key inserted into a large B-tree dirties a page of its own, so
// a B-tree index costs a page write per key once it outgrows the batch; runs
// are written and merged in key order, a few sequential pages per thousand
// keys, and their filters keep a lookup of a new key in memory.
const (
	// KeyRecentMax is how many keys the recent B-tree holds before they are
	// written out as a run.
	KeyRecentMax = keyrun.RecentMax
	// KeyRunDirectMin is how many new keys a transaction needs to write them
	// as a run directly instead of through the recent B-tree.
	KeyRunDirectMin = keyrun.DirectMin
	// KeyRunFanout is how many runs of one level are merged into one run of
	// a higher level.
	KeyRunFanout = keyrun.Fanout
)

// KeyDigest is the digest that stands for an idempotency key in the runs:
// storage.KeyDigest, the first KeyDigestSize bytes of
// BLAKE3-256("ledger/key/v1" || 0x00 || key).
func KeyDigest(key string) [KeyDigestSize]byte { return storage.KeyDigest(key) }

// runCache holds what the backend knows of the index across transactions:
// the runs (internal/keyrun), the filter of every committed key and the
// ids of committed chains. All of it is only ever filled from committed
// state.
type runCache struct {
	runs *keyrun.Cache
	// mu serialises the stores of filter.
	mu sync.Mutex
	// filter covers every committed key (see keyFilter); nil until a write
	// transaction or a writable Open (prepareProbe) builds it, so a
	// read-only handle never has one.
	filter atomic.Pointer[keyindex.Filter]
	// chains holds the ids of committed chains (see chainIDs).
	chains chainIDs
	// seqMapBytesMax bounds the seq map of each filter built (see
	// newSeqMap): negative when the handle keeps none.
	seqMapBytesMax int64
	// memory is what Options.MemoryBytesMax leaves each filter built.
	memory memoryBudget
}

func newRunCache() *runCache {
	return &runCache{runs: keyrun.NewCache(), seqMapBytesMax: -1, memory: memoryBudget{bytesMax: -1}}
}

// filterBudget bounds the next filter built (see memoryBudget).
func (c *runCache) filterBudget() keyindex.FilterBudget {
	return c.memory.filterBudget(c.seqMapBytesMax)
}

// keyIndex is one transaction's view of the index.
type keyIndex struct {
	// runs is the transaction's view of the runs.
	runs    keyrun.View
	pending map[pendingKey]uint64 // the keys new in this transaction -> seq
	// provenKeys counts the keys of a checkpoint's transaction
	// (tx.keysProvenNew), which nothing looks up before it commits: they
	// skip the pending map, and only the first KeyRunDirectMin-1 are kept
	// (provenFew), for a batch too small to be a run.
	provenKeys int
	provenFew  []provenKey
	// records holds the run records of the pending keys, in append order:
	// their digests are computed once, by the lookup that proved them new.
	records []byte
	// filter is the filter this transaction consults (nil: none);
	// filterChecked tells that it was looked for.
	filter        *keyindex.Filter
	filterChecked bool
}

// A tx is the keyrun.RecentHost of its view of the runs.
var _ keyrun.RecentHost = (*tx)(nil)

func (t *tx) RunsBucket() *bbolt.Bucket  { return t.runs() }
func (t *tx) RunCache() *keyrun.Cache    { return t.cache.runs }
func (t *tx) FilePath() string           { return t.path }
func (t *tx) WriteError(err error) error { return t.writeError(err) }
func (t *tx) loadRuns() error            { return t.index.runs.Load(t) }

func (t *tx) snapshotTxid() uint64 {
	id := uint64(t.tx.ID())
	if t.tx.Writable() {
		id-- // a write transaction carries the id it will commit as
	}
	return id
}

// lookupKey finds the seq of (chain id, key) in the index. It returns the
// key's digest as well, which an append of a new key records.
func (t *tx) lookupKey(chainID uint64, key string) (uint64, bool, [KeyDigestSize]byte, error) {
	if t.keysProvenNew {
		panic("bolt: a lookup in a checkpoint's transaction, whose new keys are not in the pending map")
	}
	var digest [KeyDigestSize]byte
	if seq, ok := t.index.pending[pendingKey{chainID, key}]; ok {
		return seq, true, digest, nil
	}
	digest = KeyDigest(key)
	f, err := t.keyFilter()
	if err != nil {
		return 0, false, digest, err
	}
	if f != nil && !f.MayContain(chainID, digest[:]) {
		return 0, false, digest, nil
	}
	seq, found, err := t.lookupDigest(chainID, key, &digest)
	return seq, found, digest, err
}

// lookupDigest is the file's part of lookupKey, for a caller that has the
// key's digest and has asked the key filter already: the runs before the
// recent B-tree (a key is in exactly one of them, the runs hold nearly
// every key, all of them with the log, whose checkpoints write runs
// directly, and a run costs a filter probe unless it may hold the key,
// where the recent B-tree costs opening its bucket and a descent).
func (t *tx) lookupDigest(chainID uint64, key string, digest *[KeyDigestSize]byte) (uint64, bool, error) {
	if seq, ok, err := t.index.runs.Lookup(t, chainID, digest); err != nil || ok {
		return seq, ok, err
	}
	return keyrun.RecentSeq(t, chainID, key)
}

// addKey records a key appended in this transaction, with its digest.
func (t *tx) addKey(chainID uint64, key string, seq uint64, digest *[KeyDigestSize]byte) {
	switch {
	case t.keysProvenNew:
		t.index.provenKeys++
		if t.index.provenKeys < KeyRunDirectMin {
			t.index.provenFew = append(t.index.provenFew, provenKey{pendingKey{chainID, key}, seq})
		}
	default:
		if t.index.pending == nil {
			t.index.pending = make(map[pendingKey]uint64)
		}
		t.index.pending[pendingKey{chainID, key}] = seq
	}
	t.index.records = binary.BigEndian.AppendUint64(t.index.records, chainID)
	t.index.records = append(t.index.records, digest[:]...)
	t.index.records = binary.BigEndian.AppendUint64(t.index.records, seq)
}

// flushKeys writes the transaction's new keys before it commits
// (keyrun.View.Flush): a large batch as a run of its own, a small one into
// the recent B-tree, which is written out as a run when it is full.
func (t *tx) flushKeys() error {
	n := len(t.index.pending) + t.index.provenKeys
	if n == 0 {
		return nil
	}
	return t.index.runs.Flush(t, n, t.index.records, func(put func(chainID uint64, key string, seq uint64) error) error {
		for k, seq := range t.index.pending {
			if err := put(k.chainID, k.key, seq); err != nil {
				return err
			}
		}
		for _, k := range t.index.provenFew {
			if err := put(k.chainID, k.key, k.seq); err != nil {
				return err
			}
		}
		return nil
	})
}

// pendingKey is a key new in a write transaction.
type pendingKey struct {
	chainID uint64
	key     string
}

// provenKey is a key of a checkpoint's transaction with its seq.
type provenKey struct {
	pendingKey
	seq uint64
}

func (t *tx) KeysBucket() *bbolt.Bucket { return t.keys() }
func (t *tx) MetaBucket() *bbolt.Bucket { return t.meta() }

func (t *tx) RenewKeysBucket() error {
	if err := t.tx.DeleteBucket(BucketKeys); err != nil {
		return t.writeError(err)
	}
	var err error
	if t.keysBucket, err = t.tx.CreateBucket(BucketKeys); err != nil {
		return t.writeError(err)
	}
	return nil
}
