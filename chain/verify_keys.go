package chain

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"runtime"
	"sync"

	"github.com/ledgerworks/ledger/chain/internal/multiset"
	"github.com/ledgerworks/ledger/storage"
)

// Verify checks the idempotency key index without a lookup per key: it
// compares, per chain, the multiset of pairs (digest of the key, seq) of the
// keyed entries it scans with the multiset of records that
// storage.Tx.ScanKeys yields (a batch at a time when the transaction is a
// storage.KeyBatchScanner), both read sequentially in the scan's read
// transaction. Each side is summarized by a keyed multiset hash: every pair
// maps to BLAKE3-keyed(k, digest || u64be(seq)) read as a 256-bit number,
// and a side is the sum of its numbers mod 2^256 with their count. k is 32
// random bytes drawn for each Verify, so whoever edits the file before the
// verify cannot know how a pair maps, nor find a set of changes whose
// numbers cancel: the sums of two different multisets are equal with
// probability about 2^-256. Without the key the map would be public, and
// with a few hundred chosen records (a keyless sum is a subset-sum in a
// group, broken by Wagner's generalized birthday attack) the index could be
// changed while its sum stays put.
//
// Only a chain whose sums or counts differ is examined record by record
// (pinpointKeys): that costs a random read per key, as the lookups that
// this check replaces did.
const (
	// keyCheckBatchSize is how many pairs one hand-off carries; a chain
	// with fewer is summed on the scanning goroutine.
	keyCheckBatchSize = 512
	// keyCheckBatchesPerWorker bounds the batches in flight per worker.
	keyCheckBatchesPerWorker = 4
	// keyExplainedMax bounds the index records that pinpointKeys remembers
	// as already reported (an entry's key mapped to another seq); past it a
	// wrongly mapped record may be reported twice, once at each seq.
	keyExplainedMax = 1 << 16
)

// multisetHashers recycles the hashers of the index side (sumIndex) from
// one verify to the next, as verifyWorkspaces does the entries' side's:
// their blocks are grown to keyCheckBatchSize messages. A hasher in the
// pool points at no key; its elements keep the last key's value, which
// elementsFor compares with the next verify's before using them.
var multisetHashers = sync.Pool{New: func() any { return multiset.NewHasher(nil) }}

// keyBatch is a hand-off: items of one side.
type keyBatch struct {
	fromIndex bool
	items     []multiset.Item
}

// sumInto sums the batch's items into the side they belong to.
func (b *keyBatch) sumInto(mh *multiset.Hasher, entries, index *multiset.Sum) {
	if b.fromIndex {
		mh.Sum(index, b.items, true)
		return
	}
	mh.Sum(entries, b.items, false)
}

// keyIndexChecker compares a chain's keyed entries with its key index.
type keyIndexChecker struct {
	ctx   context.Context
	tx    *Tx // the scan's transaction
	chain string
	key   *multiset.Key
	// endSeq is the chain's end as the scan found it: the higher of the
	// stored head's seq and the last entry read. Set before finish.
	endSeq uint64
	// entries and index are the sums made on the scanning goroutine.
	entries, index multiset.Sum
	local          *multiset.Hasher
	batch          *keyBatch
	work           chan *keyBatch // nil until the first full batch
	free           chan *keyBatch
	workers        []*keyWorker
	wg             sync.WaitGroup
	// ahead, when set, is the index side being summed on a goroutine of
	// its own while the entries are read (see sumIndexAhead).
	ahead *indexAhead
}

// indexAhead is a chain's index side summed through a transaction of its
// own; sum and err are read once done is closed.
type indexAhead struct {
	done chan struct{}
	sum  multiset.Sum
	err  error
}

// sumIndexAhead begins summing the chain's index records through stx, a
// fork of the scan's transaction, on a goroutine of its own, so that the
// index is read while the entries are rather than after them: on a
// chain verified in chunks it was a sixth of the CPU, most of it on one
// goroutine while the other cores waited. The caller calls waitAhead
// before stx ends; finish then takes the sum instead of scanning.
func (k *keyIndexChecker) sumIndexAhead(ctx context.Context, stx storage.Tx) {
	a := &indexAhead{done: make(chan struct{})}
	k.ahead = a
	go func() {
		defer close(a.done)
		a.sum, a.err = sumIndex(ctx, stx, k.chain, k.key)
	}()
}

// waitAhead waits for the goroutine of sumIndexAhead, if any.
func (k *keyIndexChecker) waitAhead() {
	if k.ahead != nil {
		<-k.ahead.done
	}
}

// sumIndex sums the chain's index records as read through stx, a batch
// at a time (indexBatches).
func sumIndex(ctx context.Context, stx storage.Tx, chain string, key *multiset.Key) (multiset.Sum, error) {
	var m multiset.Sum
	mh := multisetHashers.Get().(*multiset.Hasher)
	mh.SetKey(key)
	defer func() {
		mh.SetKey(nil)
		multisetHashers.Put(mh)
	}()
	for refs, err := range indexBatches(ctx, stx, chain) {
		if err != nil {
			return m, err
		}
		mh.SumRefs(&m, refs)
		if err := ctx.Err(); err != nil {
			return m, err
		}
	}
	return m, nil
}

// indexBatches yields the chain's index records in batches: the storage's
// own (storage.KeyBatchScanner) when the transaction reads them so, which
// costs a call per batch instead of one per record through the storage's
// nested iterators (a tenth of a warm verify's CPU); otherwise ScanKeys's
// records gathered into batches of keyCheckBatchSize. Either way every
// record is yielded once; a batch is valid until the next.
func indexBatches(ctx context.Context, stx storage.Tx, chain string) iter.Seq2[[]storage.KeyRef, error] {
	if s, ok := stx.(storage.KeyBatchScanner); ok {
		return s.ScanKeyBatches(ctx, chain)
	}
	return func(yield func([]storage.KeyRef, error) bool) {
		refs := make([]storage.KeyRef, 0, keyCheckBatchSize)
		for ref, err := range stx.ScanKeys(ctx, chain) {
			if err != nil {
				yield(nil, err)
				return
			}
			refs = append(refs, ref)
			if len(refs) == keyCheckBatchSize {
				if !yield(refs, nil) {
					return
				}
				refs = refs[:0]
			}
		}
		if len(refs) > 0 {
			yield(refs, nil)
		}
	}
}

// keyWorker is one goroutine of a checker with its partial sums, read once
// the checker's WaitGroup is done.
type keyWorker struct {
	entries, index multiset.Sum
}

func newKeyIndexChecker(ctx context.Context, tx *Tx, chain string, key *multiset.Key) *keyIndexChecker {
	return &keyIndexChecker{ctx: ctx, tx: tx, chain: chain, key: key,
		batch: &keyBatch{items: make([]multiset.Item, 0, keyCheckBatchSize)}}
}

// add queues the key of the entry at seq.
func (k *keyIndexChecker) add(seq uint64, key string) {
	k.batch.items = append(k.batch.items, multiset.Item{Key: key, Seq: seq})
	if len(k.batch.items) == keyCheckBatchSize {
		k.send()
	}
}

// addRef queues an index record; the entries must all have been added.
func (k *keyIndexChecker) addRef(ref storage.KeyRef) {
	if !k.batch.fromIndex {
		k.flush()
		k.batch.fromIndex = true
	}
	k.batch.items = append(k.batch.items, multiset.Item{Digest: ref.Digest, Seq: ref.Seq})
	if len(k.batch.items) == keyCheckBatchSize {
		k.send()
	}
}

// send hands the full batch to the workers, starting them on the first.
func (k *keyIndexChecker) send() {
	if k.work == nil {
		k.start()
	}
	fromIndex := k.batch.fromIndex
	k.work <- k.batch
	select {
	case k.batch = <-k.free:
		k.batch.items = k.batch.items[:0]
	default:
		k.batch = &keyBatch{items: make([]multiset.Item, 0, keyCheckBatchSize)}
	}
	k.batch.fromIndex = fromIndex
}

// flush sums a partial batch here: a short tail is not worth a hand-off.
func (k *keyIndexChecker) flush() {
	if len(k.batch.items) == 0 {
		return
	}
	if k.local == nil {
		k.local = multiset.NewHasher(k.key)
	}
	k.batch.sumInto(k.local, &k.entries, &k.index)
	k.batch.items = k.batch.items[:0]
}

// start begins the workers, one per two CPUs: the hashing pool of the scan
// already has a worker per CPU.
func (k *keyIndexChecker) start() {
	workers := max(runtime.GOMAXPROCS(0)/2, 1)
	k.work = make(chan *keyBatch, workers*keyCheckBatchesPerWorker)
	k.free = make(chan *keyBatch, workers*keyCheckBatchesPerWorker+1)
	for range workers {
		w := &keyWorker{}
		k.workers = append(k.workers, w)
		k.wg.Add(1)
		go func() {
			defer k.wg.Done()
			mh := multiset.NewHasher(k.key)
			for b := range k.work {
				b.sumInto(mh, &w.entries, &w.index)
				select {
				case k.free <- b:
				default:
				}
			}
		}()
	}
}

// stop ends the workers, if any, and waits for them: they read keys that
// alias the scan's transaction. Calling it again does nothing.
func (k *keyIndexChecker) stop() {
	if k.work == nil {
		return
	}
	close(k.work)
	k.wg.Wait()
	k.work = nil
	for _, w := range k.workers {
		k.entries.Merge(&w.entries)
		k.index.Merge(&w.index)
	}
	k.workers = nil
}

// finish sums the chain's index records, compares both sides and, when they
// differ, finds the records and entries that differ and hands them to add.
// The error is an operating failure.
func (k *keyIndexChecker) finish(add func(Failure)) error {
	k.flush()
	if err := k.sumIndexSide(); err != nil {
		k.stop()
		return storageError(err)
	}
	k.stop()
	if k.entries == k.index {
		return nil
	}
	return k.pinpoint(add)
}

// sumIndexSide sums the chain's index records into the index side: the
// sum sumIndexAhead made, or a scan here.
func (k *keyIndexChecker) sumIndexSide() error {
	if k.ahead != nil {
		k.waitAhead()
		if k.ahead.err != nil {
			return k.ahead.err
		}
		k.index.Merge(&k.ahead.sum)
		return nil
	}
	k.batch.fromIndex = true
	for refs, err := range indexBatches(k.ctx, k.tx.stx, k.chain) {
		if err != nil {
			return err
		}
		for _, ref := range refs {
			k.addRef(ref)
		}
	}
	k.flush()
	return nil
}

// pinpoint runs when the sums differ. It looks up each keyed entry's key
// (an entry the index does not map to itself), then reads the entry each
// index record names (a record that names no entry, or an entry without
// its key). A record is not reported again when what it names is already
// explained: at the entry whose key it holds, when that entry's key maps to
// it; or where the scan found no readable entry (see checkRecord). When
// nothing is found or explained, the index repeats a record, and the chain
// as a whole is reported.
func (k *keyIndexChecker) pinpoint(add func(Failure)) error {
	var found, excused int
	count := func(f Failure) { found++; add(f) }
	explained := map[storage.KeyRef]struct{}{}
	err := k.forEachKeyedEntry(func(seq uint64, key string) error {
		indexSeq, err := checkKey(k.ctx, k.tx.stx, k.chain, keyCheck{seq: seq, key: key}, count)
		if err == nil && indexSeq != 0 && indexSeq != seq && len(explained) < keyExplainedMax {
			explained[storage.KeyRef{Digest: storage.KeyDigest(key), Seq: indexSeq}] = struct{}{}
		}
		return err
	})
	if err != nil {
		return err
	}
	read := 0
	for ref, err := range k.tx.stx.ScanKeys(k.ctx, k.chain) {
		if err != nil {
			return storageError(err)
		}
		if read++; read%progressInterval == 0 {
			if err := k.ctx.Err(); err != nil {
				return err
			}
		}
		if _, ok := explained[ref]; ok {
			continue
		}
		skipped, err := k.checkRecord(ref, count)
		if err != nil {
			return err
		}
		if skipped {
			excused++
		}
	}
	if found == 0 && excused == 0 {
		detail := fmt.Sprintf("the key index holds %d records for %d keyed entries, each naming the entry that holds its key: a record is repeated",
			k.index.Count(), k.entries.Count())
		if k.index.Count() == k.entries.Count() {
			detail = "the key index differs from the keyed entries, though each key maps to its entry"
		}
		add(Failure{Chain: k.chain, Seq: 0, Reason: ReasonKeyIndexMismatch, Detail: detail})
	}
	return nil
}

// forEachKeyedEntry reads the chain's entries again and calls fn with each
// readable key; undecodable entries are reported by the scan already.
func (k *keyIndexChecker) forEachKeyedEntry(fn func(seq uint64, key string) error) error {
	for rec, err := range k.tx.stx.Entries(k.ctx, k.chain, 1) {
		if err != nil {
			return storageError(err)
		}
		if rec.Seq%progressInterval == 0 {
			if err := k.ctx.Err(); err != nil {
				return err
			}
		}
		key, ok := storedKey(k.chain, rec.Seq, rec.Data)
		if !ok || key == "" {
			continue
		}
		if err := fn(rec.Seq, key); err != nil {
			return err
		}
	}
	return nil
}

// storedKey is the idempotency key of stored entry bytes, aliasing them;
// ok is false when they are not an entry.
func storedKey(chain string, seq uint64, data []byte) (string, bool) {
	if f, ok := decodeFields(data); ok {
		return unsafeString(f.key), true
	}
	e, err := DecodeRecord(chain, seq, data)
	return e.IdempotencyKey, err == nil
}

// checkRecord reads the entry an index record names and reports the record
// when the entry does not hold its key, when it names seq 0, or when it
// names a seq past the chain's end: that is what a chain truncated together
// with its stored head leaves behind when the index is not rewritten too,
// so a keyed newest entry removed is reported even without a saved head
// (VerifyOptions.ExpectHeads remains the proof against a thorough rewrite).
// A record that names a missing seq inside the chain, or up to its stored
// head, or an undecodable entry is not reported (excused is then true):
// those are failures already.
func (k *keyIndexChecker) checkRecord(ref storage.KeyRef, add func(Failure)) (excused bool, err error) {
	if ref.Seq == 0 {
		add(Failure{Chain: k.chain, Seq: 0, Reason: ReasonKeyIndexMismatch,
			Detail: fmt.Sprintf("the key index names seq 0 for the key of digest %x, and no entry has seq 0", ref.Digest)})
		return false, nil
	}
	data, err := k.tx.stx.Entry(k.ctx, k.chain, ref.Seq)
	switch {
	case errors.Is(err, storage.ErrNotFound) && ref.Seq > k.endSeq:
		add(Failure{Chain: k.chain, Seq: ref.Seq, Reason: ReasonKeyIndexMismatch,
			Detail: fmt.Sprintf("the key index names seq %d for the key of digest %x, past the chain's end at seq %d: newer entries were removed, or the record was added",
				ref.Seq, ref.Digest, k.endSeq)})
		return false, nil
	case errors.Is(err, storage.ErrNotFound):
		return true, nil
	case err != nil:
		return false, storageError(err)
	}
	key, ok := storedKey(k.chain, ref.Seq, data)
	if !ok {
		return true, nil
	}
	if key == "" || storage.KeyDigest(key) != ref.Digest {
		add(Failure{Chain: k.chain, Seq: ref.Seq, Reason: ReasonKeyIndexMismatch,
			Detail: fmt.Sprintf("the key index names this entry for the key of digest %x, which the entry does not hold", ref.Digest)})
	}
	return false, nil
}

// keyCheck is one keyed entry to look up.
type keyCheck struct {
	seq uint64
	key string
}

// checkKey looks one key up and returns the seq the index maps it to (0
// when it has none). The key aliases stored bytes, so a failure's detail
// copies it.
func checkKey(ctx context.Context, stx storage.Tx, chain string, c keyCheck, add func(Failure)) (uint64, error) {
	seq, err := stx.LookupKey(ctx, chain, c.key)
	switch {
	case errors.Is(err, storage.ErrNotFound):
		add(Failure{Chain: chain, Seq: c.seq, Reason: ReasonKeyIndexMismatch,
			Detail: fmt.Sprintf("key %q is not in the key index", c.key)})
		return 0, nil
	case err != nil:
		return 0, storageError(err)
	case seq != c.seq:
		add(Failure{Chain: chain, Seq: c.seq, Reason: ReasonKeyIndexMismatch,
			Detail: fmt.Sprintf("the key index maps key %q to seq %d", c.key, seq)})
	}
	return seq, nil
}
