package chain

import (
	"cmp"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"github.com/ledgerworks/ledger/chain/internal/multiset"
	"maps"
	"slices"
	"strings"
)

// Reason names what is wrong with an entry or a chain.
type Reason string

// Failure reasons, as printed by ledgerctl verify.
const (
	// ReasonHashMismatch: the stored hash is not the hash of the entry's fields.
	ReasonHashMismatch Reason = "hash_mismatch"
	// ReasonBrokenLink: the entry's prev_hash is not the previous entry's hash
	// (or the chain's genesis for seq 1).
	ReasonBrokenLink Reason = "broken_link"
	// ReasonSeqGap: a seq is missing, repeated or out of order.
	ReasonSeqGap Reason = "seq_gap"
	// ReasonUndecodable: the stored bytes are not an entry.
	ReasonUndecodable Reason = "undecodable"
	// ReasonHeadMismatch: the chain does not end where its stored head, or a
	// head saved by the caller, says it does.
	ReasonHeadMismatch Reason = "head_mismatch"
	// ReasonStateMismatch: derived state differs from the state rebuilt from
	// the chains (reported by the domain packages' checks).
	ReasonStateMismatch Reason = "state_mismatch"
	// ReasonKeyIndexMismatch: the idempotency key index does not map an
	// entry's key to that entry's seq, so a retry with the key would not be
	// answered from it (Seq is the entry's); or an index record names an
	// entry without that key, seq 0 or a seq past the chain's end (Seq is
	// the one named); or a record is repeated (Seq is 0).
	ReasonKeyIndexMismatch Reason = "key_index_mismatch"
)

// Failure is one problem Verify found.
type Failure struct {
	Chain  string
	Seq    uint64
	Reason Reason
	Detail string
	// Expected and Calculated are set for hash mismatches and broken links:
	// the stored value and the value computed from the chain.
	Expected, Calculated Hash
}

func (f Failure) String() string {
	return fmt.Sprintf("chain %q seq %d: %s: %s", f.Chain, f.Seq, f.Reason, f.Detail)
}

// Progress is reported to VerifyOptions.Progress while Verify runs.
type Progress struct {
	Chains  int64 // chains finished
	Entries int64 // entries checked
}

// progressInterval is how many entries pass between progress reports.
const progressInterval = 16384

// VerifyOptions select what Verify checks.
type VerifyOptions struct {
	// Chains limits verification to these chains and those named in
	// ExpectHeads; all chains when empty.
	Chains []string
	// ExpectHeads are heads saved earlier (by an auditor, another system):
	// each chain must still hold an entry at that seq with that hash. This
	// catches truncation and wholesale rewrites that the stored heads cannot.
	// A head at seq 0 (a chain without entries) holds when its hash is the
	// chain's genesis.
	ExpectHeads []Head
	// Progress, when set, is called every few thousand entries and at the end.
	Progress func(Progress)
	// FailuresMax bounds the failures collected; FailuresMaxDefault when zero.
	FailuresMax int
	// ExpectTrees are tree heads taken earlier (a checkpoint's): the tree
	// of each chain's entries at that size must have that root. This
	// catches truncation (ReasonTruncated) and rewrites
	// (ReasonTreeHeadMismatch) at any scale. Their chains' stored trees
	// are checked too, as with Trees.
	ExpectTrees []TreeHead
	// Trees also checks every chain's stored Merkle tree (its compact
	// range and stored nodes) against the tree of its entries
	// (ReasonTreeMismatch). It is a second pass over the entries that
	// hashes each with SHA-256 on one core, several times the cost of the
	// entry checks, so it is asked for, not done by default: the trees are
	// what proofs are made from, not what they are checked against.
	Trees bool
}

// Report is the outcome of a verification.
type Report struct {
	Chains    int64
	Entries   int64
	Failures  []Failure
	Truncated bool // more failures were found than FailuresMax
}

// OK reports whether nothing was found.
func (r *Report) OK() bool { return len(r.Failures) == 0 }

// Err returns nil when r is OK, else a *VerificationError.
func (r *Report) Err() error {
	if r.OK() {
		return nil
	}
	return &VerificationError{Failures: r.Failures}
}

// collector gathers failures up to a bound.
type collector struct {
	report *Report
	max    int
}

func (c *collector) add(f Failure) {
	if len(c.report.Failures) >= c.max {
		c.report.Truncated = true
		return
	}
	c.report.Failures = append(c.report.Failures, f)
}

// ChainVerifier checks one chain's entries as they stream past, in constant
// memory. Feed it every entry (or decode failure) in storage order, then
// call Finish. The same verifier serves stored chains and exports.
type ChainVerifier struct {
	chain    string
	next     uint64 // the seq expected next
	prev     Hash   // the hash the next entry must link to
	linkable bool   // prev is known (false after an undecodable entry)
	last     Head
	add      func(Failure)
}

// NewChainVerifier starts verifying chain; failures go to add.
func NewChainVerifier(chain string, add func(Failure)) *ChainVerifier {
	return &ChainVerifier{chain: chain, next: 1, prev: Genesis(chain), linkable: true,
		last: Head{Chain: chain, Hash: Genesis(chain)}, add: add}
}

// Entry checks one decoded entry.
func (v *ChainVerifier) Entry(e *Entry) { v.hashed(e, e.ComputeHash()) }

// hashed is Entry for an entry whose hash over its fields is calculated
// (Verify computes hashes in a pool of workers).
func (v *ChainVerifier) hashed(e *Entry, calculated Hash) {
	if e.Chain != v.chain {
		v.fail(e.Seq, ReasonSeqGap, fmt.Sprintf("entry of chain %q inside chain %q", e.Chain, v.chain))
		return
	}
	if v.link(e.Seq, &e.PrevHash, &e.Hash, &calculated) {
		v.last = e.Head()
	}
}

// link checks the seq, hash and link of an entry of v's chain, given by
// its fields (a chunk of Verify reads them where they are stored), and
// moves v past it; false when the entry is behind v and skipped. The
// caller sets v.last for an entry it moved past.
func (v *ChainVerifier) link(seq uint64, prevHash, hash, calculated *Hash) bool {
	linkable := v.linkable
	switch {
	case seq > v.next:
		v.fail(v.next, ReasonSeqGap, fmt.Sprintf("seq %d to %d missing", v.next, seq-1))
		linkable = false
	case seq < v.next:
		v.fail(seq, ReasonSeqGap, fmt.Sprintf("seq %d after seq %d", seq, v.next-1))
		return false
	}
	if !equalHashes(calculated, hash) {
		v.add(Failure{Chain: v.chain, Seq: seq, Reason: ReasonHashMismatch,
			Detail: "stored hash differs from the hash of the entry", Expected: *hash, Calculated: *calculated})
	}
	if linkable && !equalHashes(prevHash, &v.prev) {
		v.add(Failure{Chain: v.chain, Seq: seq, Reason: ReasonBrokenLink,
			Detail: "prev_hash differs from the previous entry's hash", Expected: *prevHash, Calculated: v.prev})
	}
	v.next, v.prev, v.linkable = seq+1, *hash, true
	return true
}

// equalHashes is *a == *b in four word compares: the compiler calls
// memequal for arrays of 32 bytes, and a verify compares two pairs of
// hashes per entry.
func equalHashes(a, b *Hash) bool {
	x := binary.LittleEndian.Uint64(a[0:]) ^ binary.LittleEndian.Uint64(b[0:])
	x |= binary.LittleEndian.Uint64(a[8:]) ^ binary.LittleEndian.Uint64(b[8:])
	x |= binary.LittleEndian.Uint64(a[16:]) ^ binary.LittleEndian.Uint64(b[16:])
	x |= binary.LittleEndian.Uint64(a[24:]) ^ binary.LittleEndian.Uint64(b[24:])
	return x == 0
}

// Undecodable records an entry whose bytes could not be decoded.
func (v *ChainVerifier) Undecodable(seq uint64, err error) {
	if seq > v.next {
		v.fail(v.next, ReasonSeqGap, fmt.Sprintf("seq %d to %d missing", v.next, seq-1))
	}
	v.fail(seq, ReasonUndecodable, err.Error())
	v.next, v.linkable = seq+1, false
	v.last = Head{Chain: v.chain, Seq: seq}
}

// lastUndecodable reports whether the newest entry seen could not be decoded,
// so its hash is unknown.
func (v *ChainVerifier) lastUndecodable() bool { return !v.linkable }

// Last returns the head the verified entries end at.
func (v *ChainVerifier) Last() Head { return v.last }

// Finish compares the end of the chain with its stored head, when one is
// given.
func (v *ChainVerifier) Finish(stored *Head) {
	if stored == nil {
		return
	}
	// An undecodable newest entry is already a failure; its hash is unknown,
	// so only its seq can be compared with the head.
	hashDiffers := stored.Hash != v.last.Hash && !v.lastUndecodable()
	if stored.Seq != v.last.Seq || hashDiffers {
		v.add(Failure{Chain: v.chain, Seq: stored.Seq, Reason: ReasonHeadMismatch,
			Detail:   fmt.Sprintf("stored head is seq %d, entries end at seq %d", stored.Seq, v.last.Seq),
			Expected: stored.Hash, Calculated: v.last.Hash})
	}
}

func (v *ChainVerifier) fail(seq uint64, reason Reason, detail string) {
	v.add(Failure{Chain: v.chain, Seq: seq, Reason: reason, Detail: detail})
}

// Verify checks every entry of the selected chains: each hash against the
// entry's fields, each prev_hash against the previous entry, seqs without
// gaps, each chain's end against its stored head and against
// opts.ExpectHeads, and each chain's idempotency key index against its keyed
// entries (see verify_keys.go). It streams in constant memory (one read transaction per
// chain) and returns every failure it finds, in chain and seq order, up to
// opts.FailuresMax. The error is for operating failures only; a broken chain
// is reported in the Report (see Report.Err).
func (db *DB) Verify(ctx context.Context, opts VerifyOptions) (Report, error) {
	var report Report
	// One key for every chain of this verify: it only has to be unknown
	// to whoever wrote the file (see verify_keys.go).
	key, err := multiset.NewKey()
	if err != nil {
		return report, err
	}
	c := &collector{report: &report, max: opts.FailuresMax}
	if c.max <= 0 {
		c.max = FailuresMaxDefault
	}
	trees := map[string][]TreeHead{}
	for _, t := range opts.ExpectTrees {
		trees[t.Chain] = append(trees[t.Chain], t)
	}
	expected := map[string][]Head{}
	for _, h := range opts.ExpectHeads {
		if !checkEmptyHead(h, c.add) {
			expected[h.Chain] = append(expected[h.Chain], h)
		}
	}
	progress := func() {
		if opts.Progress != nil {
			opts.Progress(Progress{Chains: report.Chains, Entries: report.Entries})
		}
	}
	verifyOne := func(chain string) error {
		found, err := db.verifyChain(ctx, chain, expected[chain], trees[chain], opts.Trees, &key, &report, c, progress)
		if err != nil {
			return err
		}
		if found {
			report.Chains++
		}
		delete(expected, chain)
		delete(trees, chain)
		return nil
	}
	if len(opts.Chains) > 0 {
		// A saved head is never ignored: its chain is verified even when the
		// caller did not select it.
		selected := slices.Clone(opts.Chains)
		for _, h := range opts.ExpectHeads {
			selected = append(selected, h.Chain)
		}
		for _, t := range opts.ExpectTrees {
			selected = append(selected, t.Chain)
		}
		slices.Sort(selected)
		for _, chain := range slices.Compact(selected) {
			if err := verifyOne(chain); err != nil {
				return report, err
			}
		}
	} else {
		// Chains reads heads in pages, so no transaction stays open across
		// chains and memory does not grow with their number.
		for h, err := range db.Chains(ctx, "") {
			if err != nil {
				return report, err
			}
			if err := verifyOne(h.Chain); err != nil {
				return report, err
			}
		}
	}
	for chain, heads := range trees { // checkpointed chains that no longer exist
		for _, t := range heads {
			if t.Size > 0 {
				c.add(Failure{Chain: chain, Seq: t.Size, Reason: ReasonTruncated,
					Detail: fmt.Sprintf("checkpoint holds %d entries, the chain none", t.Size), Expected: Hash(t.Root)})
			}
		}
	}
	for chain, heads := range expected { // saved heads of chains that no longer exist
		for _, h := range heads {
			c.add(Failure{Chain: chain, Seq: h.Seq, Reason: ReasonHeadMismatch,
				Detail: "chain has no entries", Expected: h.Hash})
		}
	}
	sortFailures(report.Failures)
	progress()
	return report, nil
}

// verifyChain verifies one chain in one read transaction; found is false
// when the chain has no entries.
func (db *DB) verifyChain(ctx context.Context, chain string, expected []Head, trees []TreeHead, checkTrees bool, key *multiset.Key, report *Report, c *collector, progress func()) (found bool, err error) {
	v := NewChainVerifier(chain, c.add)
	want := map[uint64]Hash{}
	for _, h := range expected {
		want[h.Seq] = h.Hash
	}
	err = db.View(ctx, func(tx *Tx) error {
		failuresBefore := len(report.Failures)
		stored, err := tx.Head(chain)
		if errors.Is(err, ErrNotFound) {
			for _, h := range expected {
				c.add(Failure{Chain: chain, Seq: h.Seq, Reason: ReasonHeadMismatch, Detail: "chain has no entries", Expected: h.Hash})
			}
			for _, t := range trees {
				if t.Size > 0 {
					c.add(Failure{Chain: chain, Seq: t.Size, Reason: ReasonTruncated,
						Detail: fmt.Sprintf("checkpoint holds %d entries, the chain none", t.Size), Expected: Hash(t.Root)})
				}
			}
			return nil
		}
		if err != nil {
			return err
		}
		found = true
		keys := newKeyIndexChecker(ctx, tx, chain, key)
		defer keys.stop()
		split, handled, err := db.verifySplit(ctx, tx, chain, &stored, want, key, keys, report, c, progress)
		switch {
		case err != nil:
			return err
		case handled:
			v = split
		default:
			err = db.verifyWhole(ctx, tx, chain, v, want, keys, report, c, progress)
		}
		if err != nil {
			return err
		}
		keys.endSeq = max(stored.Seq, v.Last().Seq)
		if err := keys.finish(c.add); err != nil {
			return err
		}
		v.Finish(&stored)
		checkHeadTime(v, &stored, c.add)
		for _, seq := range slices.Sorted(maps.Keys(want)) { // in seq order, so FailuresMax keeps the same ones every time
			c.add(Failure{Chain: chain, Seq: seq, Reason: ReasonHeadMismatch,
				Detail: fmt.Sprintf("saved head seq %d is beyond the chain's end at seq %d", seq, v.Last().Seq), Expected: want[seq]})
		}
		// A tree built from broken entries differs from the stored one as
		// a consequence: only a chain whose entries hold has its stored
		// tree reported.
		entriesBroken := len(report.Failures) > failuresBefore || report.Truncated
		if checkTrees || len(trees) > 0 {
			if err := db.checkTree(ctx, tx, chain, trees, entriesBroken, c.add); err != nil {
				return err
			}
		}
		return nil
	})
	return found, err
}

// verifyWhole reads the chain's entries on the calling goroutine (the
// hashing in a pool of workers) and checks them with v.
func (db *DB) verifyWhole(ctx context.Context, tx *Tx, chain string, v *ChainVerifier, want map[uint64]Hash,
	keys *keyIndexChecker, report *Report, c *collector, progress func()) error {
	return db.scanEntries(ctx, tx, chain, func(seq uint64, e *Entry, calculated Hash, err error) error {
		if err != nil {
			v.Undecodable(seq, err)
			// The undecodable entry is the failure; a saved head at its
			// seq can be neither confirmed nor refuted.
			delete(want, seq)
		} else {
			v.hashed(e, calculated)
			if e.IdempotencyKey != "" {
				keys.add(e.Seq, e.IdempotencyKey)
			}
			if h, ok := want[e.Seq]; ok {
				if h != e.Hash {
					c.add(Failure{Chain: chain, Seq: e.Seq, Reason: ReasonHeadMismatch,
						Detail: "entry differs from the saved head", Expected: h, Calculated: e.Hash})
				}
				delete(want, e.Seq)
			}
		}
		if report.Entries++; report.Entries%progressInterval == 0 {
			if err := ctx.Err(); err != nil {
				return err
			}
			progress()
		}
		return nil
	})
}

// checkHeadTime compares the stored head's time with the newest entry's,
// when Finish found seq and hash equal: new entries' times are floored to
// the head's, so a changed head time would move every later entry's time.
// Exports have no stored head time, so this is not part of Finish.
func checkHeadTime(v *ChainVerifier, stored *Head, add func(Failure)) {
	last := v.Last()
	if v.lastUndecodable() || stored.Seq != last.Seq || stored.Hash != last.Hash || stored.TimeUnixNano == last.TimeUnixNano {
		return
	}
	add(Failure{Chain: last.Chain, Seq: last.Seq, Reason: ReasonHeadMismatch,
		Detail:   fmt.Sprintf("stored head time %d differs from the entry's time %d", stored.TimeUnixNano, last.TimeUnixNano),
		Expected: stored.Hash, Calculated: last.Hash})
}

// checkEmptyHead settles a saved head at seq 0, the head of a chain without
// entries: every chain starts at its genesis, so such a head holds exactly
// when its hash is the genesis. It reports whether h was such a head.
func checkEmptyHead(h Head, add func(Failure)) bool {
	if h.Seq != 0 {
		return false
	}
	if genesis := Genesis(h.Chain); h.Hash != genesis {
		add(Failure{Chain: h.Chain, Seq: 0, Reason: ReasonHeadMismatch,
			Detail: "saved head at seq 0 is not the chain's genesis", Expected: h.Hash, Calculated: genesis})
	}
	return true
}

// sortFailures puts failures in chain and seq order, keeping the order in
// which one entry's failures were found.
func sortFailures(failures []Failure) {
	slices.SortStableFunc(failures, func(a, b Failure) int {
		return cmp.Or(strings.Compare(a.Chain, b.Chain), cmp.Compare(a.Seq, b.Seq))
	})
}
