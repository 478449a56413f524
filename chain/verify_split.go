package chain

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/ledgerworks/ledger/chain/internal/multiset"
	"github.com/ledgerworks/ledger/storage"
)

// A long chain is verified in chunks of consecutive seqs by one goroutine
// per CPU, when the store can fork its read transaction (storage.Forker):
// each goroutine reads through its own transaction on the same snapshot,
// takes the next chunk nobody has taken, decodes and hashes its entries
// there, checks the links inside the chunk and sums its keys for the key
// index check. One goroutine reading the chain was the limit of a warm
// verify, not the hashing, which a pool did already. Chunks handed out in
// order keep the goroutines reading neighbouring stretches of the file (a
// cold file is still read nearly in order), and a goroutine the machine
// runs less takes fewer of them.
//
// What a chunk cannot know, the hash its first entry must link to and the
// seq it must have, is settled on the calling goroutine in seq order as
// the chunks finish (verifyStitch), so the report is the one the reading
// on one goroutine gives, failure for failure and in the same order. Each
// chunk streams like that reading does (a batch of entries and one of keys
// at a time) and keeps its failures, at most FailuresMax, until it is
// stitched; no goroutine runs more than verifyChunksAhead chunks ahead of
// the stitching, so memory stays bounded.
const (
	// verifyChunkEntriesDefault is the entries of a chunk: a seek and a
	// hand-off per chunk are nothing beside 65,536 entries (about 24 MiB).
	verifyChunkEntriesDefault = 1 << 16
	// verifyChunksMax bounds a chain's chunks: a damaged head may claim
	// any seq, and the chunks grow instead.
	verifyChunksMax = 1 << 16
	// verifyChunksAhead bounds, per goroutine, the chunks taken but not
	// yet stitched.
	verifyChunksAhead = 2
)

// verifyChunkEntries is verifyChunkEntriesDefault, changed by tests that
// send short chains through the chunks.
var verifyChunkEntries atomic.Uint64

func init() { verifyChunkEntries.Store(verifyChunkEntriesDefault) }

// verifySplitChains counts the chains verified in chunks, for tests that
// must know the chunks were used.
var verifySplitChains atomic.Int64

// verifyIndexAheadChains counts the chains whose key index was summed
// while their entries were read (sumIndexAhead), for tests that must know.
var verifyIndexAheadChains atomic.Int64

// verifyChunking returns the entries per chunk and the number of chunks of
// a chain whose stored head is at headSeq. The last chunk reads to the
// chain's end, wherever that is.
func verifyChunking(headSeq uint64) (size, count uint64) {
	size = max(verifyChunkEntries.Load(), 1)
	if headSeq/size >= verifyChunksMax {
		size = headSeq/verifyChunksMax + 1
	}
	count = headSeq / size
	if headSeq%size != 0 {
		count++
	}
	return size, count
}

// verifyChunk is one chunk, the seqs from..until-1 (until 0: to the end),
// read by one goroutine through its own transaction.
type verifyChunk struct {
	from, until uint64

	// What the chunk found, read once it is done.
	failures  []Failure
	truncated bool // more failures than failMax were found
	// first is the chunk's first entry; linkAt is where in failures a
	// broken link of that entry goes (after its hash mismatch, before a
	// saved head's mismatch), as the reading on one goroutine finds them.
	first struct {
		seen      bool
		seq       uint64
		decodable bool
		prevHash  Hash
		linkAt    int
	}
	end ChainVerifier // its state after the chunk's last entry
	// lastSeq and lastData are the chunk's newest entry when it was
	// decodable (lastData is its stored bytes): end.last is set from them
	// once, at the chunk's end, not per entry.
	lastSeq  uint64
	lastData []byte
	keys     multiset.Sum // the chunk's keyed entries
	settled  []uint64     // the saved heads' seqs it met
	failMax  int
	progress *verifyProgress
	err      error
}

// verifyWorkspace is one goroutine's memory, reused for its chunks.
type verifyWorkspace struct {
	scratch  verifyScratch
	items    []verifyItem
	keyItems []multiset.Item
	hasher   *multiset.Hasher
}

// verifyWorkspaces recycles the workspaces of the chunks' goroutines from
// one verify to the next. Grown to a batch's size (the hash inputs of
// verifyBatchSize entries, the multiset's blocks of keyCheckBatchSize
// keys), a workspace made for each goroutine of each verify was most of
// what a verify allocated, and the garbage collections that woke ran
// beside the verify: a write barrier on every item stored while they
// marked, about 3% of a warm verify's CPU.
var verifyWorkspaces = sync.Pool{New: func() any {
	return &verifyWorkspace{items: make([]verifyItem, 0, verifyBatchSize),
		keyItems: make([]multiset.Item, 0, keyCheckBatchSize), hasher: multiset.NewHasher(nil)}
}}

// getVerifyWorkspace returns a workspace whose hasher uses key.
func getVerifyWorkspace(key *multiset.Key) *verifyWorkspace {
	w := verifyWorkspaces.Get().(*verifyWorkspace)
	w.hasher.SetKey(key)
	return w
}

// release returns w to verifyWorkspaces without the references its items
// hold to a transaction's pages (stored bytes, keys), and pointing at no
// key (see multisetHashers).
func (w *verifyWorkspace) release() {
	clear(w.items[:cap(w.items)])
	clear(w.keyItems[:cap(w.keyItems)])
	w.items, w.keyItems = w.items[:0], w.keyItems[:0]
	w.hasher.SetKey(nil)
	verifyWorkspaces.Put(w)
}

// verifyProgress is how the chunks' goroutines tell the calling goroutine
// how far they are: entries read so far, and a nudge when more are or a
// chunk is done.
type verifyProgress struct {
	entries atomic.Int64
	nudge   chan struct{}
}

func (vp *verifyProgress) wake() {
	select {
	case vp.nudge <- struct{}{}:
	default:
	}
}

func (p *verifyChunk) add(f Failure) {
	if len(p.failures) >= p.failMax {
		p.truncated = true
		return
	}
	p.failures = append(p.failures, f)
}

// run reads and checks the chunk through stx. It stops at the first error,
// and when ctx ends (another chunk failed, or the caller's context).
func (p *verifyChunk) run(ctx context.Context, stx storage.Tx, chain string, want map[uint64]Hash, w *verifyWorkspace) error {
	v := &p.end
	*v = ChainVerifier{chain: chain, add: p.add}
	items, keyItems := w.items[:0], w.keyItems[:0]
	check := func() error {
		w.scratch.hashItems(chain, items)
		for i := 0; i < len(items); i++ {
			if i = p.linked(v, items, i, want, &keyItems, w.hasher); i == len(items) {
				break
			}
			p.entry(v, &items[i], want, &keyItems)
			if len(keyItems) == keyCheckBatchSize {
				w.hasher.Sum(&p.keys, keyItems, false)
				keyItems = keyItems[:0]
			}
		}
		p.progress.entries.Add(int64(len(items)))
		p.progress.wake()
		items = items[:0]
		return ctx.Err()
	}
	for rec, err := range stx.Entries(ctx, chain, p.from) {
		if err != nil {
			return storageError(err)
		}
		if p.until != 0 && rec.Seq >= p.until {
			break
		}
		// Only seq and data: hashItems sets the rest of every item.
		items = items[:len(items)+1]
		items[len(items)-1].seq, items[len(items)-1].data = rec.Seq, rec.Data
		if len(items) == verifyBatchSize {
			if err := check(); err != nil {
				return err
			}
		}
	}
	if err := check(); err != nil {
		return err
	}
	w.hasher.Sum(&p.keys, keyItems, false) // the keys alias the transaction's pages: summed before it ends
	w.items, w.keyItems = items[:0], keyItems[:0]
	if p.lastData != nil {
		last := verifyItem{seq: p.lastSeq, data: p.lastData}
		v.last = Head{Chain: chain, Seq: last.seq, Hash: *last.hash(), TimeUnixNano: last.timeUnixNano()}
		p.lastData = nil // the transaction's pages
	}
	return nil
}

// entry checks one hashed item as verifyChain's scan does; the chunk's
// first entry is checked without its seq and link, which the stitch
// settles.
func (p *verifyChunk) entry(v *ChainVerifier, it *verifyItem, want map[uint64]Hash, keyItems *[]multiset.Item) {
	first := !p.first.seen
	if first {
		p.first.seen, p.first.seq, p.first.decodable = true, it.seq, it.err == nil
		if it.err == nil {
			p.first.prevHash = *it.prevHash()
		}
		v.next, v.linkable = it.seq, false
	}
	if it.err != nil {
		v.Undecodable(it.seq, it.err)
		p.lastData = nil // v.last is the undecodable entry's
		if first {
			p.first.linkAt = len(p.failures)
		}
		if _, ok := want[it.seq]; ok {
			p.settled = append(p.settled, it.seq)
		}
		return
	}
	if !v.link(it.seq, it.prevHash(), it.hash(), &it.calculated) {
		return
	}
	p.lastSeq, p.lastData = it.seq, it.data
	if first {
		p.first.linkAt = len(p.failures)
	}
	if key := it.key(); key != "" {
		*keyItems = append(*keyItems, multiset.Item{Key: key, Seq: it.seq})
	}
	if len(want) == 0 {
		return
	}
	if h, ok := want[it.seq]; ok {
		if h != *it.hash() {
			p.add(Failure{Chain: v.chain, Seq: it.seq, Reason: ReasonHeadMismatch,
				Detail: "entry differs from the saved head", Expected: h, Calculated: *it.hash()})
		}
		p.settled = append(p.settled, it.seq)
	}
}

// linked checks items from items[i] on as entry does, for as long as each
// is decodable, has the next seq, its stored hash is its hash and (v
// being linkable) its previous hash is v's: the entries without a failure,
// nearly all, go through one loop without entry's bookkeeping per entry
// (its call, the link's, the chunk's first entry, the saved heads, the
// newest entry stored per entry). It returns the index of the first item
// it did not take, which entry then checks, having moved v and the chunk
// past the ones before as entry would have; i itself when the chunk's
// first entry is still to come or saved heads are expected, which only
// entry checks.
func (p *verifyChunk) linked(v *ChainVerifier, items []verifyItem, i int, want map[uint64]Hash, keyItems *[]multiset.Item, hasher *multiset.Hasher) int {
	if !p.first.seen || len(want) != 0 {
		return i
	}
	start, next, linkable, prev := i, v.next, v.linkable, &v.prev
	for ; i < len(items); i++ {
		it := &items[i]
		if it.err != nil || it.seq != next || !equalHashes(&it.calculated, it.hash()) ||
			(linkable && !equalHashes(it.prevHash(), prev)) {
			break
		}
		next, linkable, prev = next+1, true, it.hash()
		if key := it.key(); key != "" {
			*keyItems = append(*keyItems, multiset.Item{Key: key, Seq: it.seq})
			if len(*keyItems) == keyCheckBatchSize {
				hasher.Sum(&p.keys, *keyItems, false)
				*keyItems = (*keyItems)[:0]
			}
		}
	}
	if i > start {
		last := &items[i-1]
		v.next, v.prev, v.linkable = next, *last.hash(), true
		p.lastSeq, p.lastData = last.seq, last.data
	}
	return i
}

// verifySplit verifies the entries of a chain in chunks when the chain is
// long enough and tx can be forked. handled is false when it did nothing:
// the caller then reads the chain on one goroutine. Otherwise it returns
// the chain's verifier as the reading on one goroutine leaves it, with
// every entry's failures added to c, keys holding the keyed entries' sum,
// the saved heads met deleted from want, and report.Entries counted.
func (db *DB) verifySplit(ctx context.Context, tx *Tx, chain string, stored *Head, want map[uint64]Hash,
	key *multiset.Key, keys *keyIndexChecker, report *Report, c *collector, progress func()) (v *ChainVerifier, handled bool, err error) {
	size, count := verifyChunking(stored.Seq)
	workers := min(uint64(runtime.GOMAXPROCS(0)), count)
	forker, ok := tx.stx.(storage.Forker)
	if workers < 2 || !ok {
		return nil, false, nil
	}
	stxs := []storage.Tx{tx.stx}
	defer func() {
		for _, fork := range stxs[1:] {
			fork.Rollback()
		}
	}()
	for range workers - 1 {
		fork, err := forker.Fork(ctx)
		if err != nil {
			return nil, false, nil // read on one goroutine instead
		}
		stxs = append(stxs, fork)
	}
	chunkCtx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	// One more fork reads the key index meanwhile; without it finish
	// reads the index after the entries.
	if fork, err := forker.Fork(ctx); err == nil {
		keys.sumIndexAhead(chunkCtx, fork)
		verifyIndexAheadChains.Add(1)
		defer func() {
			cancel(nil) // a verify that stops early does not wait for the whole index
			keys.waitAhead()
			fork.Rollback()
		}()
	}

	s := &verifyChunks{count: count, ahead: workers * verifyChunksAhead, done: map[uint64]*verifyChunk{}}
	s.cond = sync.NewCond(&s.mu)
	shared := &verifyProgress{nudge: make(chan struct{}, 1)}
	var wg sync.WaitGroup
	defer func() {
		s.stop()
		wg.Wait() // the workers read the transactions
	}()
	for _, stx := range stxs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			w := getVerifyWorkspace(key)
			defer w.release()
			for j, ok := s.take(); ok; j, ok = s.take() {
				p := &verifyChunk{from: 1 + j*size, failMax: c.max, progress: shared}
				if j+1 < count {
					p.until = p.from + size
				}
				if p.err = p.run(chunkCtx, stx, chain, want, w); p.err != nil {
					cancel(p.err)
				}
				s.finish(j, p)
				shared.wake()
			}
		}()
	}

	base, reported := report.Entries, report.Entries/progressInterval
	reportProgress := func() {
		// The reports the reading on one goroutine makes: one at every
		// multiple of progressInterval.
		for total := base + shared.entries.Load(); (reported+1)*progressInterval <= total && ctx.Err() == nil; {
			reported++
			report.Entries = reported * progressInterval
			progress()
		}
	}
	stitch := newVerifyStitch(chain, c)
	var settled []uint64 // deleted from want once the workers, which read it, are done
	for next := uint64(0); next < count; {
		select {
		case <-shared.nudge:
		case <-chunkCtx.Done():
		}
		if err := ctx.Err(); err != nil {
			return nil, true, err
		}
		if chunkCtx.Err() != nil {
			return nil, true, context.Cause(chunkCtx)
		}
		reportProgress()
		for ; next < count; next++ {
			p := s.stitched(next)
			if p == nil {
				break
			}
			stitch.add(p)
			keys.entries.Merge(&p.keys)
			settled = append(settled, p.settled...)
		}
	}
	s.stop()
	wg.Wait()
	keys.waitAhead() // before the deferred cancel, which would stop it
	for _, seq := range settled {
		delete(want, seq)
	}
	reportProgress()
	report.Entries = base + shared.entries.Load()
	verifySplitChains.Add(1)
	return stitch.v, true, nil
}

// verifyChunks hands out a chain's chunks in order and collects them until
// they are stitched.
type verifyChunks struct {
	mu       sync.Mutex
	cond     *sync.Cond
	count    uint64 // chunks of the chain
	next     uint64 // the chunk to hand out next
	stitches uint64 // chunks stitched
	ahead    uint64 // chunks taken but not stitched, at most
	stopped  bool
	done     map[uint64]*verifyChunk // finished, not stitched
}

// take returns the next chunk, waiting while too many are ahead of the
// stitching; ok is false when none is left or the verify stopped.
func (s *verifyChunks) take() (j uint64, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for !s.stopped && s.next < s.count && s.next >= s.stitches+s.ahead {
		s.cond.Wait()
	}
	if s.stopped || s.next >= s.count {
		return 0, false
	}
	s.next++
	return s.next - 1, true
}

// finish hands a finished chunk to the stitching.
func (s *verifyChunks) finish(j uint64, p *verifyChunk) {
	s.mu.Lock()
	s.done[j] = p
	s.mu.Unlock()
}

// stitched returns chunk j once it is finished, and counts it as
// stitched; nil when it is not finished yet.
func (s *verifyChunks) stitched(j uint64) *verifyChunk {
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.done[j]
	if p != nil {
		delete(s.done, j)
		s.stitches = j + 1
		s.cond.Broadcast()
	}
	return p
}

// stop makes every take return false.
func (s *verifyChunks) stop() {
	s.mu.Lock()
	s.stopped = true
	s.cond.Broadcast()
	s.mu.Unlock()
}

// verifyStitch checks each chunk's first entry against the end of the
// chunks before it and adds every chunk's failures to c in seq order; v is
// the verifier as it stands after the last entry stitched.
type verifyStitch struct {
	v *ChainVerifier
	c *collector
}

func newVerifyStitch(chain string, c *collector) *verifyStitch {
	return &verifyStitch{v: NewChainVerifier(chain, c.add), c: c}
}

func (st *verifyStitch) add(p *verifyChunk) {
	v, c := st.v, st.c
	if !p.first.seen {
		return
	}
	// The first entry's failures come first: a gap before it, its own
	// (hash mismatch, undecodable), a broken link, then a saved head it
	// differs from.
	linkable := v.linkable
	if s := p.first.seq; s > v.next {
		v.fail(v.next, ReasonSeqGap, fmt.Sprintf("seq %d to %d missing", v.next, s-1))
		linkable = false
	}
	for _, f := range p.failures[:p.first.linkAt] {
		c.add(f)
	}
	if p.first.decodable && linkable && p.first.prevHash != v.prev {
		c.add(Failure{Chain: v.chain, Seq: p.first.seq, Reason: ReasonBrokenLink,
			Detail: "prev_hash differs from the previous entry's hash", Expected: p.first.prevHash, Calculated: v.prev})
	}
	for _, f := range p.failures[p.first.linkAt:] {
		c.add(f)
	}
	if p.truncated {
		c.report.Truncated = true
	}
	v.next, v.prev, v.linkable, v.last = p.end.next, p.end.prev, p.end.linkable, p.end.last
}
