package idempotency

import (
	"hash/maphash"
	"sync"
	"sync/atomic"
)

// filterBitsMin is the smallest scope filter (128 KiB), and filterBitsPerScope
// the bits a rebuilt filter gives each scope it holds (a false positive
// rate near 0.1% at seven probes).
const (
	filterBitsMin      = 1 << 20
	filterBitsPerScope = 16
	filterProbes       = 7
)

// scopeFilter is a Bloom filter of the scopes the ledger store holds a
// durable record or retry count for. A scope it rules out needs no read
// transaction in Create, which is the common case: most requests carry a
// new key. It only grows between rebuilds (DeleteExpired), so it may hold
// scopes that are gone; that costs a read, never a wrong answer.
type scopeFilter struct {
	mu   sync.RWMutex // held for reading by add, for writing by swap
	cur  *bloom
	next *bloom // being rebuilt: adds go to both
	seed maphash.Seed
}

type bloom struct {
	words []atomic.Uint64
	mask  uint64
	added atomic.Int64 // scopes added, for the decision to rebuild
}

// full reports whether b holds more scopes than it was sized for.
func (b *bloom) full() bool { return uint64(b.added.Load())*filterBitsPerScope > b.mask+1 }

func newBloom(scopes int) *bloom {
	bits := uint64(filterBitsMin)
	for bits < uint64(scopes)*filterBitsPerScope {
		bits <<= 1
	}
	return &bloom{words: make([]atomic.Uint64, bits/64), mask: bits - 1}
}

func (f *scopeFilter) hashes(s Scope) (uint64, uint64) {
	var h maphash.Hash
	h.SetSeed(f.seed)
	h.WriteString(s.Operation)
	h.WriteByte(0)
	h.WriteString(s.User)
	h.WriteByte(0)
	h.WriteString(s.Key)
	a := h.Sum64()
	return a, (a>>33 | a<<31) | 1
}

func (b *bloom) add(h1, h2 uint64) {
	b.added.Add(1)
	for i := range uint64(filterProbes) {
		bit := (h1 + i*h2) & b.mask
		b.words[bit/64].Or(1 << (bit % 64))
	}
}

func (b *bloom) mayHold(h1, h2 uint64) bool {
	for i := range uint64(filterProbes) {
		bit := (h1 + i*h2) & b.mask
		if b.words[bit/64].Load()&(1<<(bit%64)) == 0 {
			return false
		}
	}
	return true
}

// add records that s has a durable record or retry count (add it before
// the lease that hid the record is dropped). It reports whether the
// current filter is full and wants a rebuild.
func (f *scopeFilter) add(s Scope) (full bool) {
	h1, h2 := f.hashes(s)
	f.mu.RLock()
	f.cur.add(h1, h2)
	if f.next != nil {
		f.next.add(h1, h2)
	}
	full = f.next == nil && f.cur.full()
	f.mu.RUnlock()
	return full
}

// mayHold reports whether s may have a durable record or retry count.
func (f *scopeFilter) mayHold(s Scope) bool {
	h1, h2 := f.hashes(s)
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.cur.mayHold(h1, h2)
}

// startRebuild begins a filter sized for scopes; adds go to it as well
// until finishRebuild makes it current.
func (f *scopeFilter) startRebuild(scopes int) *bloom {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.next = newBloom(max(scopes, int(f.cur.added.Load())) * 2)
	return f.next
}

func (f *scopeFilter) finishRebuild(b *bloom, ok bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if ok {
		f.cur = b
	}
	f.next = nil
}
