package idempotency

import (
	"hash/maphash"
	"math/bits"
	"sync"
	"sync/atomic"
)

// filterBitsMin is the smallest layer of the scope filter (128 KiB), and
// filterBitsPerScope the bits a layer gives each scope it is sized for (a
// false positive rate near 0.1% per layer at seven probes in one block).
const (
	filterBitsMin      = 1 << 20
	filterBitsPerScope = 16
	filterProbes       = 7
	filterBlockWords   = 8 // a block is a cache line: a probe costs one miss
)

// scopeFilter is a Bloom filter of the scopes the ledger store holds a
// durable record or retry count for. A scope it rules out needs no read
// transaction in Create, which is the common case: most requests carry a
// new key. It grows by layers: when the newest layer holds the scopes it
// was sized for, a layer twice its size takes the next ones, so that
// growing reads nothing back; a rebuild (at open and after a cleanup,
// which removes scopes) makes one layer sized for the stored scopes. It
// may hold scopes that are gone; that costs a read, never a wrong answer.
type scopeFilter struct {
	mu     sync.RWMutex // held for reading by add and mayHold, for writing to change layers
	layers []*bloom     // oldest first; adds go to the newest
	next   *bloom       // being rebuilt: adds go to it as well
	seed   maphash.Seed
}

// bloom is one layer: a blocked Bloom filter, whose probes of a scope all
// fall in one block of filterBlockWords words.
type bloom struct {
	words  []atomic.Uint64
	blocks uint64
	added  atomic.Int64 // scopes added, against the scopes it was sized for
	sized  int64
}

// full reports whether b holds the scopes it was sized for.
func (b *bloom) full() bool { return b.added.Load() >= b.sized }

func newBloom(scopes int) *bloom {
	n := uint64(filterBitsMin)
	for n < uint64(scopes)*filterBitsPerScope {
		n <<= 1
	}
	words := n / 64
	return &bloom{words: make([]atomic.Uint64, words), blocks: words / filterBlockWords, sized: int64(n / filterBitsPerScope)}
}

// hashes returns the two hashes of a scope: h1 picks the block, h2 the
// bits in it.
func (f *scopeFilter) hashes(s Scope) (uint64, uint64) {
	var h maphash.Hash
	h.SetSeed(f.seed)
	h.WriteString(s.Operation)
	h.WriteByte(0)
	h.WriteString(s.User)
	h.WriteByte(0)
	h.WriteString(s.Key)
	a := h.Sum64()
	return a, bits.RotateLeft64(a*0x9e3779b97f4a7c15, 31)
}

// keyHashes is hashes of the scope whose key form (scopeBytes) is b,
// without building its strings; false when b is not a scope's key form.
func (f *scopeFilter) keyHashes(b []byte) (uint64, uint64, bool) {
	zeros := 0
	for _, c := range b {
		if c == 0 {
			zeros++
		}
	}
	if zeros != 2 {
		return 0, 0, false
	}
	var h maphash.Hash
	h.SetSeed(f.seed)
	h.Write(b) // the names and the zeros between them, as hashes writes them
	a := h.Sum64()
	return a, bits.RotateLeft64(a*0x9e3779b97f4a7c15, 31), true
}

// added is how many scopes the layers were given since the last rebuild.
func (f *scopeFilter) added() int64 {
	f.mu.RLock()
	defer f.mu.RUnlock()
	n := int64(0)
	for _, b := range f.layers {
		n += b.added.Load()
	}
	return n
}

// probe returns the word index and bit of probe i of (h1, h2): nine bits
// of h2 each pick one of the block's 512 bits.
func (b *bloom) probe(h1, h2 uint64, i int) (uint64, uint64) {
	bit := h2 >> (9 * i) & (filterBlockWords*64 - 1)
	return (h1%b.blocks)*filterBlockWords + bit/64, 1 << (bit % 64)
}

func (b *bloom) add(h1, h2 uint64) {
	b.added.Add(1)
	for i := range filterProbes {
		w, m := b.probe(h1, h2, i)
		if b.words[w].Load()&m == 0 {
			b.words[w].Or(m)
		}
	}
}

func (b *bloom) mayHold(h1, h2 uint64) bool {
	for i := range filterProbes {
		w, m := b.probe(h1, h2, i)
		if b.words[w].Load()&m == 0 {
			return false
		}
	}
	return true
}

// add records that s has a durable record or retry count (add it before
// the lease that hid the record is dropped), in a new layer when the
// newest is full.
func (f *scopeFilter) add(s Scope) {
	h1, h2 := f.hashes(s)
	f.mu.RLock()
	newest := f.layers[len(f.layers)-1]
	newest.add(h1, h2)
	if f.next != nil {
		f.next.add(h1, h2)
	}
	full := newest.full()
	f.mu.RUnlock()
	if full {
		f.mu.Lock()
		if last := f.layers[len(f.layers)-1]; last == newest {
			f.layers = append(f.layers, newBloom(int(newest.sized)*2))
		}
		f.mu.Unlock()
	}
}

// mayHold reports whether s may have a durable record or retry count.
func (f *scopeFilter) mayHold(s Scope) bool {
	h1, h2 := f.hashes(s)
	f.mu.RLock()
	defer f.mu.RUnlock()
	for _, b := range f.layers {
		if b.mayHold(h1, h2) {
			return true
		}
	}
	return false
}

// startRebuild begins a layer sized for scopes; adds go to it as well
// until finishRebuild makes it the only one.
func (f *scopeFilter) startRebuild(scopes int) *bloom {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.next = newBloom(scopes * 2)
	return f.next
}

func (f *scopeFilter) finishRebuild(b *bloom, ok bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if ok {
		f.layers = []*bloom{b}
	}
	f.next = nil
}
