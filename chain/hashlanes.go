package chain

import (
	"context"

	"github.com/ledgerworks/ledger/internal/blake3batch"
	"github.com/ledgerworks/ledger/storage"
)

// A group commit's Appends are independent requests, often each on a chain
// of its own (a service's accounts, warehouses, documents). The first
// Append of a group on each chain links to the chain's head, known before
// the group runs, so those hashes do not wait for one another: they are
// computed side by side in the lanes of internal/blake3batch (sixteen
// messages a compression with AVX-512) before the group runs, as a
// hashAhead's slots. Each Append takes its slot when the slot's seq,
// prev_hash and time are its own entry's, and hashes otherwise (a replay
// before it, an Update's function that appended to the chain first). The
// group's Appends take one reading of the clock.

// laneGroupMin is the fewest Appends on distinct chains for which a group's
// hashes are computed in the lanes: fewer fill too little of a compression
// to pay for reading the heads first.
const laneGroupMin = 4

// laneScratch is the committer's memory for hashGroupInLanes, kept between
// groups.
type laneScratch struct {
	seen     map[string]struct{}
	first    []int // the index in the group of each chain's first Append
	input    []byte
	ends     []int
	messages [][]byte
	hashes   [][blake3batch.Size]byte
}

// laneInputKeptMax bounds the hash input a laneScratch keeps between
// groups.
const laneInputKeptMax = 1 << 20

// hashGroupInLanes returns the slots of group's first Append on each chain,
// hashed in the lanes, or nil when that would not pay off: no lane path,
// too few such Appends, or a head that cannot be read (the Appends then
// report the error). Appends whose payload makes a message longer than a
// BLAKE3 chunk are left to hash themselves.
func (db *DB) hashGroupInLanes(stx storage.Tx, group []*request, s *laneScratch) *hashAhead {
	if len(group) < laneGroupMin || blake3batch.Lanes() < 2 {
		return nil
	}
	if s.seen == nil {
		s.seen = make(map[string]struct{})
	}
	s.first = s.first[:0]
	for i, r := range group {
		if r.fn != nil || len(r.appendReq.Payload) > blake3batch.ChunkSize {
			continue
		}
		if _, ok := s.seen[r.appendReq.Chain]; !ok {
			s.seen[r.appendReq.Chain] = struct{}{}
			s.first = append(s.first, i)
		}
	}
	clear(s.seen) // keep no chain id past the group
	if len(s.first) < laneGroupMin {
		return nil
	}
	// No helper runs: finish finds it cancelled and only releases.
	h := &hashAhead{scratch: aheadScratches.Get().(*aheadScratch), now: db.clock().UnixNano()}
	h.chainOf, h.buf = h.scratch.chainOf[:0], h.scratch.buf
	if cap(h.scratch.slots) < len(group) {
		h.scratch.slots = make([]aheadSlot, len(group))
	}
	h.slots = h.scratch.slots[:len(group)]
	clear(h.slots) // seq 0 matches no entry: the slots not hashed here
	tx := &Tx{db: db, ctx: context.Background(), stx: stx}
	s.input, s.ends = s.input[:0], s.ends[:0]
	for _, i := range s.first {
		r := &group[i].appendReq
		head, err := tx.head(r.Chain)
		if err != nil {
			h.release()
			return nil
		}
		slot := &h.slots[i]
		slot.seq, slot.prev, slot.time = head.Seq+1, head.Hash, entryTime(h.now, head.Seq, head.TimeUnixNano)
		s.input = appendHashInput(s.input, r.Chain, slot.seq, &slot.prev, slot.time, r.IdempotencyKey, r.Type, r.Payload)
		s.ends = append(s.ends, len(s.input))
	}
	s.messages = s.messages[:0]
	for k, end := range s.ends {
		start := 0
		if k > 0 {
			start = s.ends[k-1]
		}
		s.messages = append(s.messages, s.input[start:end])
	}
	if cap(s.hashes) < len(s.messages) {
		s.hashes = make([][blake3batch.Size]byte, len(s.messages))
	}
	s.hashes = s.hashes[:len(s.messages)]
	blake3batch.Sum256(s.hashes, s.messages)
	for k, i := range s.first {
		h.slots[i].hash = s.hashes[k]
	}
	clear(s.messages)
	if cap(s.input) > laneInputKeptMax {
		s.input = nil
	}
	h.hashed.Store(int64(len(group)))
	return h
}
