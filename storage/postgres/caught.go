package postgres

import (
	"sync"

	"github.com/ledgerworks/ledger/storage"
)

// The round trip that locks a group's heads reads, after the locks, the
// entries other processes appended to those chains since this process's
// key filters last saw them (sqlCatchUp). Their keys catch the filters up;
// the entries themselves are kept here for the transaction's reads. A
// writer that keeps per-chain state of its own beside the entries (the
// chain package's Merkle trees) brings that state up to the head locked
// by reading exactly these entries, and finds them without another round
// trip, and without sending the appends buffered so far.

// caughtRun is the entries after+1 … after+len(data) of one chain, every
// one of them, committed before the transaction locked the chain's head.
type caughtRun struct {
	after uint64
	data  [][]byte
}

// catchUpBytes is the bytes of entries sqlCatchUp returns for each of
// chains chains: PreparedDataBytesMax shared, at least 64 KiB a chain.
// Past it only the entries' keys come back, for the filters.
func catchUpBytes(chains int) int64 {
	return max(int64(PreparedDataBytesMax/max(chains, 1)), 64<<10)
}

// keepCaught keeps, up to PreparedDataBytesMax bytes a transaction, the
// entries sqlCatchUp read for each chain whose head the transaction now
// holds, when they are every entry between the seq asked from and the
// head locked; a chain with a gap (a head more than KeyFilterCatchUpMax
// ahead, entries past catchUpBytes) keeps nothing, and its reads go to the
// server.
func (t *tx) keepCaught(chains []string, afters []int64, caught []caughtEntry) {
	runs := make([]caughtRun, len(chains))
	for i := range chains {
		lh, held := t.heads[chains[i]]
		after := uint64(afters[i])
		if !held || lh.lockedSeq <= after || lh.lockedSeq-after > KeyFilterCatchUpMax {
			continue
		}
		runs[i] = caughtRun{after: after, data: make([][]byte, lh.lockedSeq-after)}
	}
	for _, e := range caught {
		r := &runs[e.index]
		if e.seq <= r.after || e.seq-r.after > uint64(len(r.data)) {
			continue
		}
		r.data[e.seq-r.after-1] = e.data
	}
	for i, r := range runs {
		if len(r.data) == 0 || !t.keepsCaught(r) {
			continue
		}
		if t.caught == nil {
			t.caught = make(map[string]caughtRun)
		}
		t.caught[chains[i]] = r
	}
}

// keepsCaught reports whether run is whole and fits the bytes left, and
// counts its bytes when it does.
func (t *tx) keepsCaught(r caughtRun) bool {
	n := 0
	for _, d := range r.data {
		if d == nil {
			return false
		}
		n += len(d)
	}
	if t.caughtBytes+n > PreparedDataBytesMax {
		return false
	}
	t.caughtBytes += n
	return true
}

// caughtEntries yields the kept entries of chain from seq from on, and
// returns the seq to read on from and false when yield stopped.
func (t *tx) caughtEntries(chain string, from uint64, yield func(storage.Record, error) bool) (uint64, bool) {
	r, ok := t.caught[chain]
	if !ok || from <= r.after || from > r.after+uint64(len(r.data)) {
		return from, true
	}
	for seq := from; seq <= r.after+uint64(len(r.data)); seq++ {
		if !yield(storage.Record{Seq: seq, Data: r.data[seq-r.after-1]}, nil) {
			return seq, false
		}
	}
	return r.after + uint64(len(r.data)) + 1, true
}

// HeadsSeenMax bounds the chains whose heads a Backend remembers having
// appended to (headsSeen): a chain past it is caught up by its key filter
// only, and its other readers ask the server.
const HeadsSeenMax = 1 << 16

// headsSeen is the seq each chain's head had after this process's last
// commit that appended to it: what the chain package's trees cached for
// the chain then. The lock round trip catches up the entries past it.
type headsSeen struct {
	mu   sync.Mutex
	seqs map[string]uint64
}

func newHeadsSeen() *headsSeen { return &headsSeen{seqs: make(map[string]uint64)} }

func (h *headsSeen) get(chain string) (uint64, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	seq, ok := h.seqs[chain]
	return seq, ok
}

// set records seq for chain, unless HeadsSeenMax other chains are held.
// Two commits on one chain may record in either order: the greater seq
// stays.
func (h *headsSeen) set(chain string, seq uint64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	old, ok := h.seqs[chain]
	if (ok && seq > old) || (!ok && len(h.seqs) < HeadsSeenMax) {
		h.seqs[chain] = seq
	}
}
