package chain

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/ledgerworks/ledger/storage"
)

// A long chain is verified in parts, one per CPU, when the store can fork
// its read transaction (storage.Forker): each part reads its own range of
// seqs through its own transaction on the same snapshot, decodes and hashes
// there, checks the links inside the range and sums its keys for the key
// index check. One goroutine reading the chain was the limit of a warm
// verify, not the hashing, which a pool did already.
//
// What a part cannot know, the hash its first entry must link to and the
// seq it must have, is settled afterwards in seq order (stitch), so the
// report is the one the reading on one goroutine gives, failure for
// failure and in the same order. Each part streams like that reading does
// (a batch of entries and one of keys at a time); it keeps its failures,
// at most FailuresMax of them, until the stitch.

// verifyPartEntriesMinDefault is the fewest entries a part is given: below
// it the forks and goroutines cost more than they save.
const verifyPartEntriesMinDefault = 1 << 15

// verifyPartEntriesMin is verifyPartEntriesMinDefault, changed by tests
// that send short chains through the parts.
var verifyPartEntriesMin atomic.Uint64

func init() { verifyPartEntriesMin.Store(verifyPartEntriesMinDefault) }

// verifySplitChains counts the chains verified in parts, for tests that
// must know the parts were used.
var verifySplitChains atomic.Int64

// verifyPartStarts returns the first seq of each part of a chain whose
// stored head is at headSeq, or nil when the chain is read in one piece.
// The last part reads to the chain's end, wherever that is.
func verifyPartStarts(headSeq uint64, procs int) []uint64 {
	parts := uint64(max(procs, 1))
	if whole := headSeq / max(verifyPartEntriesMin.Load(), 1); whole < parts {
		parts = whole
	}
	if parts < 2 {
		return nil
	}
	starts := make([]uint64, parts)
	for i := range parts {
		// 1 + i*headSeq/parts, without the product's overflow.
		starts[i] = 1 + headSeq/parts*i + headSeq%parts*i/parts
	}
	return starts
}

// verifyPart is one range of seqs, from..until-1 (until 0: to the end),
// read by one goroutine through its own transaction.
type verifyPart struct {
	from, until uint64
	stx         storage.Tx

	// What the part found, read once it is done.
	failures  []Failure
	truncated bool // more failures than failuresMax were found
	// first is the part's first entry; linkAt is where in failures a
	// broken link of that entry goes (after its hash mismatch, before a
	// saved head's mismatch), as the reading on one goroutine finds them.
	first struct {
		seen      bool
		seq       uint64
		decodable bool
		prevHash  Hash
		linkAt    int
	}
	end      ChainVerifier // its state after the part's last entry
	keys     multisetSum   // the part's keyed entries
	settled  []uint64      // the saved heads' seqs it met
	failMax  int
	progress *verifyProgress
}

// verifyProgress is how the parts tell the calling goroutine how far they
// are: entries read so far, and a nudge when more are.
type verifyProgress struct {
	entries atomic.Int64
	nudge   chan struct{}
}

func (p *verifyPart) add(f Failure) {
	if len(p.failures) >= p.failMax {
		p.truncated = true
		return
	}
	p.failures = append(p.failures, f)
}

// run reads and checks the part. It stops at the first error, and when ctx
// ends (another part failed, or the caller's context).
func (p *verifyPart) run(ctx context.Context, chain string, want map[uint64]Hash, key *multisetKey) error {
	v := &p.end
	*v = ChainVerifier{chain: chain, add: p.add}
	var (
		scratch  verifyScratch
		items    = make([]verifyItem, 0, verifyBatchSize)
		keyItems = make([]keyItem, 0, keyCheckBatchSize)
		hasher   = newMultisetHasher(key)
	)
	check := func() error {
		scratch.hashItems(chain, items)
		for i := range items {
			p.entry(v, &items[i], want, &keyItems)
			if len(keyItems) == keyCheckBatchSize {
				hasher.sum(&p.keys, keyItems, false)
				keyItems = keyItems[:0]
			}
		}
		p.progress.entries.Add(int64(len(items)))
		select {
		case p.progress.nudge <- struct{}{}:
		default:
		}
		items = items[:0]
		return ctx.Err()
	}
	for rec, err := range p.stx.Entries(ctx, chain, p.from) {
		if err != nil {
			return storageError(err)
		}
		if p.until != 0 && rec.Seq >= p.until {
			break
		}
		items = append(items, verifyItem{seq: rec.Seq, data: rec.Data})
		if len(items) == verifyBatchSize {
			if err := check(); err != nil {
				return err
			}
		}
	}
	if err := check(); err != nil {
		return err
	}
	hasher.sum(&p.keys, keyItems, false) // the keys alias the transaction's pages: summed before it ends
	return nil
}

// entry checks one hashed item as verifyChain's scan does; the part's
// first entry is checked without its seq and link, which the stitch
// settles.
func (p *verifyPart) entry(v *ChainVerifier, it *verifyItem, want map[uint64]Hash, keyItems *[]keyItem) {
	first := !p.first.seen
	if first {
		p.first.seen, p.first.seq, p.first.decodable = true, it.seq, it.err == nil
		p.first.prevHash = it.entry.PrevHash
		v.next, v.linkable = it.seq, false
	}
	if it.err != nil {
		v.Undecodable(it.seq, it.err)
		if first {
			p.first.linkAt = len(p.failures)
		}
		if _, ok := want[it.seq]; ok {
			p.settled = append(p.settled, it.seq)
		}
		return
	}
	e := &it.entry
	v.hashed(e, it.calculated)
	if first {
		p.first.linkAt = len(p.failures)
	}
	if e.IdempotencyKey != "" {
		*keyItems = append(*keyItems, keyItem{key: e.IdempotencyKey, seq: e.Seq})
	}
	if h, ok := want[e.Seq]; ok {
		if h != e.Hash {
			p.add(Failure{Chain: v.chain, Seq: e.Seq, Reason: ReasonHeadMismatch,
				Detail: "entry differs from the saved head", Expected: h, Calculated: e.Hash})
		}
		p.settled = append(p.settled, e.Seq)
	}
}

// verifySplit verifies the entries of a chain in parts when the chain is
// long enough and tx can be forked. handled is false when it did nothing:
// the caller then reads the chain on one goroutine. Otherwise it returns
// the chain's verifier as the reading on one goroutine leaves it, with
// every entry's failures added to c, keys holding the keyed entries' sum,
// the saved heads met deleted from want, and report.Entries counted.
func (db *DB) verifySplit(ctx context.Context, tx *Tx, chain string, stored *Head, want map[uint64]Hash,
	key *multisetKey, keys *keyIndexChecker, report *Report, c *collector, progress func()) (v *ChainVerifier, handled bool, err error) {
	starts := verifyPartStarts(stored.Seq, runtime.GOMAXPROCS(0))
	forker, ok := tx.stx.(storage.Forker)
	if starts == nil || !ok {
		return nil, false, nil
	}
	parts := make([]verifyPart, len(starts))
	shared := &verifyProgress{nudge: make(chan struct{}, 1)}
	for i := range parts {
		p := &parts[i]
		p.from, p.stx, p.failMax, p.progress = starts[i], tx.stx, c.max, shared
		if i+1 < len(starts) {
			p.until = starts[i+1]
		}
	}
	defer func() {
		for i := 1; i < len(parts); i++ {
			if parts[i].stx != tx.stx && parts[i].stx != nil {
				parts[i].stx.Rollback()
			}
		}
	}()
	for i := 1; i < len(parts); i++ {
		fork, err := forker.Fork(ctx)
		if err != nil {
			parts[i].stx = nil
			return nil, false, nil // read on one goroutine instead
		}
		parts[i].stx = fork
	}

	partCtx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var wg sync.WaitGroup
	for i := range parts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := parts[i].run(partCtx, chain, want, key); err != nil {
				cancel(err)
			}
		}()
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
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
	for waiting := true; waiting; {
		select {
		case <-shared.nudge:
			reportProgress()
		case <-done:
			waiting = false
		}
	}
	if err := ctx.Err(); err != nil {
		return nil, true, err
	}
	if partCtx.Err() != nil {
		return nil, true, context.Cause(partCtx)
	}
	reportProgress()
	report.Entries = base + shared.entries.Load()
	verifySplitChains.Add(1)
	v = stitch(chain, parts, c)
	for i := range parts {
		keys.entries.merge(&parts[i].keys)
		for _, seq := range parts[i].settled {
			delete(want, seq)
		}
	}
	return v, true, nil
}

// stitch checks each part's first entry against the end of the parts
// before it, adds every part's failures to c in seq order, and returns the
// verifier as it stands after the last entry.
func stitch(chain string, parts []verifyPart, c *collector) *ChainVerifier {
	v := NewChainVerifier(chain, c.add)
	for i := range parts {
		p := &parts[i]
		if !p.first.seen {
			continue
		}
		// The first entry's failures come first: a gap before it, its
		// own (hash mismatch, undecodable), a broken link, then a saved
		// head it differs from.
		linkable := v.linkable
		if s := p.first.seq; s > v.next {
			v.fail(v.next, ReasonSeqGap, fmt.Sprintf("seq %d to %d missing", v.next, s-1))
			linkable = false
		}
		for _, f := range p.failures[:p.first.linkAt] {
			c.add(f)
		}
		if p.first.decodable && linkable && p.first.prevHash != v.prev {
			c.add(Failure{Chain: chain, Seq: p.first.seq, Reason: ReasonBrokenLink,
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
	return v
}
