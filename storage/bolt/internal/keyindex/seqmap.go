package keyindex

import (
	"encoding/binary"
	"math/bits"
	"sync/atomic"
	"unsafe"

	"github.com/ledgerworks/ledger/internal/prefetch"
)

// The seq map sits beside the key filter (see keyFilter) and follows its
// life: built with it from every key of the index, added to with it after
// each commit, dropped with it. Where the filter says only that a key may
// be in the file, the map names the entry a retry most likely has, so that
// a replay reads that entry without searching the key runs: one miss on
// the map and one on the entry, where the runs cost the filters' lines,
// then a run record, then the entry, each load waiting for the one before.
//
// A slot holds a fingerprint of (chain id, digest) and the entry's seq. A
// fingerprint is not a key: two keys may share one, so what the map gives is
// a candidate, which the reader confirms by the key stored in the entry
// (Options.EntryKey) and otherwise looks up in the runs as before.
//
// A map that holds every key its filter holds rules a key out as the filter
// does, in the one line a new key's search reads (the filter is then not
// read at all). A map that had to leave a key out (a seq too large for a
// slot, a map full) says so (partial), and from then on only names
// candidates: a key it lacks goes to the filter and the runs, so that a map
// that holds fewer keys than the file is slower, never wrong.
const (
	// SeqMapSeqBits is the part of a slot that holds seq+1 (0 is an empty
	// slot): seqs up to 2^40-2, about a trillion entries in one chain. A
	// larger seq is left out of the map.
	SeqMapSeqBits = 40
	// seqMapSlotBytes is the size of one slot.
	seqMapSlotBytes = 8
	// seqMapLoadNum/seqMapLoadDen is the share of the slots a map is sized
	// to fill at its filter's capacity; adds stop at seqMapFullNum/Den, so
	// that an open slot always ends a search.
	seqMapLoadNum, seqMapLoadDen = 4, 5
	SeqMapFullNum, SeqMapFullDen = 9, 10
	// SeqMapBytesMaxDefault is the memory a handle's seq map may take when
	// Options.SeqMapBytesMax is zero: the map of a filter sized for
	// 26,800,000 keys, and a map for up to that many keys.
	SeqMapBytesMaxDefault = 256 << 20
)

// SeqMap is an open-addressing table of fingerprints and seqs, probed
// linearly from the slot its hash falls in. Slots are read and written
// atomically: replays read it while the committer adds to it, one writer
// at a time (under the run cache's lock, or before it is published).
type SeqMap struct {
	Slots []uint64
	// Used counts the filled slots; only the writer reads it.
	Used uint64
	// Partial is set, before the filter's asOf moves past the commit, once
	// an add has been dropped: the map no longer rules keys out.
	Partial atomic.Bool
}

// newSeqMap returns a map for the keys there are, sized for the filter's
// capacity, or as large as bytesMax allows when that is smaller (it may
// then fill before the filter is rebuilt, and become partial); nil when
// bytesMax is negative or too small to hold the keys there are.
func newSeqMap(keys, capacity uint64, bytesMax int64) *SeqMap {
	n, ok := seqMapSlots(keys, capacity, bytesMax)
	if !ok {
		return nil
	}
	return &SeqMap{Slots: make([]uint64, n)}
}

// seqMapSlots is the size of newSeqMap's map; ok false when it has none.
func seqMapSlots(keys, capacity uint64, bytesMax int64) (uint64, bool) {
	if bytesMax < 0 {
		return 0, false
	}
	n := min(capacity*seqMapLoadDen/seqMapLoadNum, uint64(bytesMax)/seqMapSlotBytes)
	if keys*seqMapLoadDen/seqMapLoadNum > n {
		return 0, false
	}
	return max(n, 1), true
}

// hashes returns the slot a key's search begins at and its fingerprint, in
// a slot's high bits. The slot is the digest's first eight bytes read as
// the runs order them (big-endian), moved by an offset of the chain, then
// scaled to the map. Within a chain the slots follow the digests: a run's
// records, and a checkpoint's keys, sorted by chain and digest, fill the
// map from one place onwards, line after line, where a hash that scattered
// them cost a cache miss an add. Across chains the offsets differ: one key
// in many chains (an account's "deposit-1" in each of 10,000 accounts) has
// one digest, and without the offset its copies began at one slot and grew
// one cluster that every search nearby walked to its end.
func (m *SeqMap) hashes(chainID uint64, digest []byte) (slot uint64, fingerprint uint64) {
	offset := chainID * 0x9e3779b97f4a7c15
	slot, _ = bits.Mul64(binary.BigEndian.Uint64(digest[0:8])+offset, uint64(len(m.Slots)))
	fingerprint = binary.LittleEndian.Uint64(digest[8:16]) ^ offset
	return slot, fingerprint &^ (1<<SeqMapSeqBits - 1)
}

// add records the key's seq. Adds beyond the map's fill limit, and seqs too
// large for a slot, are dropped: the key is then read through the runs.
func (m *SeqMap) add(chainID uint64, digest []byte, seq uint64) {
	if seq >= 1<<SeqMapSeqBits-1 || m.Used*SeqMapFullDen >= uint64(len(m.Slots))*SeqMapFullNum {
		m.Partial.Store(true)
		return
	}
	i, fingerprint := m.hashes(chainID, digest)
	for atomic.LoadUint64(&m.Slots[i]) != 0 {
		if i++; i == uint64(len(m.Slots)) {
			i = 0
		}
	}
	atomic.StoreUint64(&m.Slots[i], fingerprint|(seq+1))
	m.Used++
}

// Find returns the seq of the first slot with the key's fingerprint, the
// likely entry of the key; ok is false when the search meets an open slot
// first. A candidate other than the key's own (another key of the same
// fingerprint before it) is read, found wanting and sent to the runs.
func (m *SeqMap) Find(chainID uint64, digest []byte) (seq uint64, ok bool) {
	i, fingerprint := m.hashes(chainID, digest)
	for range len(m.Slots) {
		s := atomic.LoadUint64(&m.Slots[i])
		if s == 0 {
			return 0, false
		}
		if s&^(1<<SeqMapSeqBits-1) == fingerprint {
			return s&(1<<SeqMapSeqBits-1) - 1, true
		}
		if i++; i == uint64(len(m.Slots)) {
			i = 0
		}
	}
	return 0, false
}

// Prefetch asks for the line where the key's search begins (see
// internal/prefetch): a batch of reads asks for every key's line before
// it searches for the first.
func (m *SeqMap) Prefetch(chainID uint64, digest []byte) {
	i, _ := m.hashes(chainID, digest)
	prefetch.Line((*byte)(unsafe.Pointer(&m.Slots[i])))
}

// Plant puts a slot with the key's fingerprint and seq where the key's
// search begins, and moves the filled slots from there on (up to the open
// slot that ends them) one slot further, so that the key's search meets the
// planted slot first and every other key is still found: its slot moves,
// the slots between its start and it stay filled. The map must have an open
// slot, and no other goroutine may add to it meanwhile.
func (m *SeqMap) Plant(chainID uint64, digest []byte, seq uint64) {
	start, fingerprint := m.hashes(chainID, digest)
	n := uint64(len(m.Slots))
	end := start
	for atomic.LoadUint64(&m.Slots[end]) != 0 {
		if end = (end + 1) % n; end == start {
			panic("plant: the seq map has no open slot")
		}
	}
	for i := end; i != start; {
		prev := (i + n - 1) % n
		atomic.StoreUint64(&m.Slots[i], atomic.LoadUint64(&m.Slots[prev]))
		i = prev
	}
	atomic.StoreUint64(&m.Slots[start], fingerprint|(seq+1))
	m.Used++
}
