package postgres

import (
	"hash/maphash"
	"math/bits"
	"sync"
)

// Key filters spare writers a round trip per idempotency key.
//
// A writer looks each key up before it appends it. In a transaction that
// appends many keyed entries to one chain (a batch, or a group commit of many
// callers), each look-up would be a round trip. The backend therefore keeps,
// per chain, a Bloom filter of the keys of the chain's entries 1..seq. Entries
// never change, so the filter can only fall behind, never be wrong: when the
// chain's head (read under its lock) is further than the filter, the keys of
// the missing entries are fetched first, in one query. A key the filter
// does not contain is certainly not in the chain and needs no round trip; a
// key it may contain is looked up on the server as before.
//
// Several processes append to the same chains: a process's filter is then
// behind by the others' entries whenever its group commit locks the head.
// PrepareKeys catches the filters of the heads it locks up in the same
// round trip, with one query after the locks, so a group costs two round
// trips (lock, commit) however many processes write its chains.
//
// The unique constraint (chain_id, idempotency_key) stays the last word: if
// a filter ever claimed a stored key absent, the commit would fail with
// storage.ErrDuplicate, never store the key twice.

const (
	// KeyFilterMinLookups is the number of keyed look-ups on one chain in
	// one transaction from which the backend builds the chain's key filter
	// (single appends never pay for one).
	KeyFilterMinLookups = 3

	// KeyFilterMaxEntries is the largest chain (head seq) for which a key
	// filter is built: building reads every key of the chain once.
	KeyFilterMaxEntries = 1 << 20

	// KeyFilterCatchUpMax is the most entries by which a chain's filter
	// may be behind for the round trip that locks the chain's head to
	// catch it up (entries other processes appended since this one's
	// last transaction on the chain); a filter further behind catches up
	// in a query of its own.
	KeyFilterCatchUpMax = 1 << 12

	// KeyFilterMaxBytes bounds the memory of all key filters of a backend;
	// the least recently used are dropped beyond it.
	KeyFilterMaxBytes = 64 << 20

	keyFilterBitsPerKey = 16 // false positives well under 0.1% with 8 probes
	keyFilterProbes     = 8
	keyFilterMinBits    = 1 << 13
)

// keyFilter is a Bloom filter of the idempotency keys of a chain's entries
// 1..seq.
type keyFilter struct {
	mu    sync.Mutex
	seq   uint64 // the keys of entries 1..seq are in bits
	keys  int    // keys added
	bits  []uint64
	used  uint64 // last use, for eviction
	chain string
}

// keyFilters holds a backend's filters.
type keyFilters struct {
	mu    sync.Mutex
	seed  maphash.Seed
	clock uint64
	bytes int
	m     map[string]*keyFilter
}

func newKeyFilters() *keyFilters {
	return &keyFilters{seed: maphash.MakeSeed(), m: make(map[string]*keyFilter)}
}

// get returns the chain's filter, or nil.
func (fs *keyFilters) get(chain string) *keyFilter {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	f := fs.m[chain]
	if f != nil {
		fs.clock++
		f.used = fs.clock
	}
	return f
}

// put installs f for its chain, dropping the least recently used filters
// beyond KeyFilterMaxBytes.
func (fs *keyFilters) put(f *keyFilter) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	if old := fs.m[f.chain]; old != nil {
		fs.bytes -= 8 * len(old.bits)
	}
	fs.clock++
	f.used = fs.clock
	fs.m[f.chain] = f
	fs.bytes += 8 * len(f.bits)
	for fs.bytes > KeyFilterMaxBytes && len(fs.m) > 1 {
		var victim *keyFilter
		for _, g := range fs.m {
			if g != f && (victim == nil || g.used < victim.used) {
				victim = g
			}
		}
		delete(fs.m, victim.chain)
		fs.bytes -= 8 * len(victim.bits)
	}
}

// drop forgets the chain's filter.
func (fs *keyFilters) drop(chain string) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	if f := fs.m[chain]; f != nil {
		fs.bytes -= 8 * len(f.bits)
		delete(fs.m, chain)
	}
}

// newKeyFilter returns an empty filter sized for about n keys.
func newKeyFilter(chain string, n int) *keyFilter {
	m := max(keyFilterMinBits, 1<<bits.Len(uint(max(n, 1)*keyFilterBitsPerKey)))
	return &keyFilter{chain: chain, bits: make([]uint64, m/64)}
}

// probes calls fn with the bit positions of key.
func (fs *keyFilters) probes(f *keyFilter, key string, fn func(i uint64) bool) bool {
	h := maphash.String(fs.seed, key)
	h1, h2 := h, h>>29|1
	mask := uint64(len(f.bits)*64 - 1)
	for i := range uint64(keyFilterProbes) {
		if !fn((h1 + i*h2) & mask) {
			return false
		}
	}
	return true
}

// add records key; f.mu must be held.
func (fs *keyFilters) add(f *keyFilter, key string) {
	fs.probes(f, key, func(i uint64) bool {
		f.bits[i/64] |= 1 << (i % 64)
		return true
	})
	f.keys++
}

// mayContain reports whether key may be among the filter's keys; false is
// certain. f.mu must be held.
func (fs *keyFilters) mayContain(f *keyFilter, key string) bool {
	return fs.probes(f, key, func(i uint64) bool { return f.bits[i/64]&(1<<(i%64)) != 0 })
}

// current reports whether the filter holds the keys of entries 1..seq
// exactly and is not full.
func (f *keyFilter) current(seq uint64) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.seq == seq && !f.full()
}

// full reports whether the filter holds more keys than it was sized for,
// so that its false positives rise; it is then rebuilt larger.
func (f *keyFilter) full() bool {
	return f.keys*keyFilterBitsPerKey > 2*len(f.bits)*64
}
