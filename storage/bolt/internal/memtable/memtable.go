package memtable

import (
	"fmt"
	"hash/maphash"
	"slices"
	"sort"
	"strings"
	"sync"
	"unsafe"

	"github.com/ledgerworks/ledger/storage"
	"github.com/ledgerworks/ledger/storage/bolt/internal/commitrec"
)

// Table holds committed transactions that are in the log but not yet in
// the bbolt file. Every item carries the LSN of the commit that wrote it,
// and a reader sees only the items of commits up to the LSN of its view
// (asOf): entries and keys are only ever added, so a visibility check on
// each is a snapshot; heads and state keep one version per commit.
//
// One writer (the backend's committer) applies commits under mu; readers
// take mu shared for the moment it takes to copy a bounded chunk, never
// while they yield to a caller. A frozen table is no longer written.
type Table struct {
	mu     sync.RWMutex
	chains map[string]*memChain
	state  map[string]*memState
	// stateKeys orders the state keys, with their versions, for scans.
	stateKeys orderedKeys[*memState]
	// firstLSN and lastLSN are the LSNs of the first and last commit the
	// table holds (0 when empty).
	firstLSN, lastLSN uint64
	// sizeBytes approximates the memory the table holds (records plus the
	// overhead of its items), compared against Options.MemtableBytesMax.
	sizeBytes int64
	// records keeps the commit records the items point into.
	records [][]byte
}

// memChain is one chain's part of a memory table: consecutive entries.
type memChain struct {
	entries []Entry
	keys    KeyTable
}

type Entry struct {
	Seq  uint64
	LSN  uint64
	Key  string
	Data []byte
	Head storage.Head
}

// KeyTable indexes the idempotency keys of a run of entries (a memory
// table's chain, or a write transaction's) by position in the run. It is an
// open-addressing table of 64-bit key hashes (KeyHash) with linear probing,
// at most half full, and the table grows by moving slots without hashing a
// key again (a Go map of strings hashes every key again as it grows: a
// quarter of a commit's CPU when a memory table filled). Equal hashes are
// told apart by the keys themselves, which the entries hold.
//
// A filter of one 64-bit word per 8 slots (16 to 32 bits per key) comes
// first: a new key, the common lookup of a write, is ruled out by a word
// that stays in the processor's cache, instead of a slot of a table of
// megabytes, a miss to memory.
type KeyTable struct {
	slots  []keySlot // a power of two long, or nil
	filter []uint64  // len(slots)/keyTableSlotsPerWord words
	count  int
}

type keySlot struct {
	hash     uint64 // keyHash of the key; 0 marks an empty slot
	position int    // of the entry in the run
}

const (
	keyTableSlotsMin     = 8
	keyTableSlotsPerWord = 8
)

// keySeed makes the hashes of KeyTable unpredictable, so that no chosen set
// of keys collides on purpose.
var keySeed = maphash.MakeSeed()

// KeyHash is the hash of an idempotency key in a KeyTable, never 0.
func KeyHash(key string) uint64 {
	return max(maphash.String(keySeed, key), 1)
}

// filterWord and filterBits place a hash in the filter: a word chosen by
// its top bits (the slot by its low ones) and four bits of it chosen by
// 24 bits in between.
func (k *KeyTable) filterWord(hash uint64) *uint64 {
	return &k.filter[(hash>>32)&uint64(len(k.filter)-1)]
}

func filterBits(hash uint64) uint64 {
	return 1<<(hash>>8&63) | 1<<(hash>>14&63) | 1<<(hash>>20&63) | 1<<(hash>>26&63)
}

// Find returns the position of key (whose keyHash is hash) in entries.
func (k *KeyTable) Find(hash uint64, key string, entries []Entry) (int, bool) {
	if k.count == 0 {
		return 0, false
	}
	if bits := filterBits(hash); *k.filterWord(hash)&bits != bits {
		return 0, false
	}
	mask := uint64(len(k.slots) - 1)
	for i := hash & mask; ; i = (i + 1) & mask {
		s := &k.slots[i]
		if s.hash == 0 {
			return 0, false
		}
		if s.hash == hash && entries[s.position].Key == key {
			return s.position, true
		}
	}
}

// Put maps key (whose keyHash is hash) to position in entries, replacing
// the position it had.
func (k *KeyTable) Put(hash uint64, key string, position int, entries []Entry) {
	if 2*(k.count+1) > len(k.slots) {
		k.grow()
	}
	mask := uint64(len(k.slots) - 1)
	for i := hash & mask; ; i = (i + 1) & mask {
		s := &k.slots[i]
		if s.hash == 0 {
			*s = keySlot{hash: hash, position: position}
			*k.filterWord(hash) |= filterBits(hash)
			k.count++
			return
		}
		if s.hash == hash && entries[s.position].Key == key {
			s.position = position
			return
		}
	}
}

// reserve sizes an empty table for keys keys without growing.
func (k *KeyTable) reserve(keys int) {
	if k.count != 0 {
		panic("bolt: reserve of a key table in use")
	}
	slots := keyTableSlotsMin
	for slots < 2*(keys+1) {
		slots *= 2
	}
	if slots > len(k.slots) {
		k.slots = make([]keySlot, slots)
		k.filter = make([]uint64, slots/keyTableSlotsPerWord)
	}
}

// grow doubles the slots and the filter, moving each slot by its stored
// hash.
func (k *KeyTable) grow() {
	old := k.slots
	k.slots = make([]keySlot, max(2*len(old), keyTableSlotsMin))
	k.filter = make([]uint64, len(k.slots)/keyTableSlotsPerWord)
	mask := uint64(len(k.slots) - 1)
	for _, s := range old {
		if s.hash == 0 {
			continue
		}
		i := s.hash & mask
		for k.slots[i].hash != 0 {
			i = (i + 1) & mask
		}
		k.slots[i] = s
		*k.filterWord(s.hash) |= filterBits(s.hash)
	}
}

// Reset empties the table and keeps its slots.
func (k *KeyTable) Reset() {
	if k.count > 0 {
		clear(k.slots)
		clear(k.filter)
	}
	k.count = 0
}

// Walk calls chain with each chain's entries, in chain name order, then
// state with each state key's version as of through, in key order, under
// one hold of the table's lock, and stops at the first error either
// returns.
func (m *Table) Walk(through uint64, chain func(name string, entries []Entry) error, state func(key string, v StateVersion) error) error {
	m.mu.RLock()
	defer m.mu.RUnlock()
	names := make([]string, 0, len(m.chains))
	for name := range m.chains {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		if err := chain(name, m.chains[name].entries); err != nil {
			return err
		}
	}
	var err error
	m.stateKeys.scan("", nil, false, func(key string, s *memState) bool {
		v, ok := s.visible(through)
		if ok {
			err = state(key, v)
		}
		return err == nil
	})
	return err
}

// SlotCount is the number of slots the table has allocated.
func (k *KeyTable) SlotCount() int { return len(k.slots) }

// memState holds the versions of one state key, oldest first. Most keys
// are put once in a table's life: their one version lives in first, in
// the same allocation.
type memState struct {
	versions []StateVersion
	first    [1]StateVersion
}

type StateVersion struct {
	LSN     uint64
	Value   []byte
	Deleted bool
}

// Per-item memory overhead counted against the bound (maps, slices and
// headers), measured roughly: it keeps a table of tiny entries from
// holding far more memory than MemtableBytesMax says.
const (
	memEntryOverheadBytes = 160
	memStateOverheadBytes = 96
)

func New() *Table {
	return &Table{chains: map[string]*memChain{}, state: map[string]*memState{}}
}

// Apply adds one commit whose operations' byte slices point into record
// (decoded from it, or encoded into it by encodeCommitAliased), which the
// table keeps.
func (m *Table) Apply(lsn uint64, record []byte, operations []commitrec.Operation) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if lsn <= m.lastLSN {
		panic("bolt: memory table applied out of order")
	}
	if m.firstLSN == 0 {
		m.firstLSN = lsn
	}
	m.lastLSN = lsn
	m.records = append(m.records, record)
	m.sizeBytes += int64(len(record))
	// The chain of the previous append: a transaction's appends come in
	// runs, which look the chain up once.
	var c *memChain
	var chain string
	for i := range operations {
		o := &operations[i]
		switch o.Kind {
		case commitrec.KindAppend:
			if c == nil || o.Chain != chain {
				c, chain = m.chains[o.Chain], o.Chain
				if c == nil {
					c = &memChain{}
					m.chains[o.Chain] = c
				}
			}
			n := len(c.entries)
			if n > 0 && c.entries[n-1].Seq+1 != o.Seq {
				panic("bolt: memory table entries out of order")
			}
			if n == cap(c.entries) {
				// Doubling: append's growth of large slices, 1.25 times,
				// copies each entry four times over as a table fills.
				c.entries = slices.Grow(c.entries, max(n, 16))
			}
			c.entries = append(c.entries, Entry{Seq: o.Seq, LSN: lsn, Key: o.Key, Data: o.Data, Head: o.Head})
			if o.Key != "" {
				hash := o.KeyHash
				if hash == 0 {
					hash = KeyHash(o.Key)
				}
				c.keys.Put(hash, o.Key, n, c.entries)
			}
			m.sizeBytes += memEntryOverheadBytes
		case commitrec.KindStatePut, commitrec.KindStateDelete:
			s := m.state[string(o.State)]
			if s == nil {
				s = &memState{}
				s.versions = s.first[:0]
				// The key is read in place: record, which the table
				// keeps, is never written again.
				key := unsafe.String(unsafe.SliceData(o.State), len(o.State))
				m.state[key] = s
				m.stateKeys.insert(key, s)
			}
			s.versions = append(s.versions, StateVersion{LSN: lsn, Value: o.Data, Deleted: o.Kind == commitrec.KindStateDelete})
			m.sizeBytes += memStateOverheadBytes
		}
	}
}

// Bounds of presizeLike: only chains that filled much of the previous
// table are sized ahead, and only so many, so that a workload that moved
// on wastes at most a few arrays for one table's life.
const (
	presizeEntriesMin = 4096
	presizeChainsMax  = 16
)

// PresizeLike gives an empty table's largest chains, and its state map,
// the room they took in previous, the table frozen before it: a steady
// workload then fills the new table without growing its entries, key
// tables and state map step by step (each step copies the entries and
// moves the keys: 5% of the committer's CPU in P1). The caller holds the
// writer slot.
func (m *Table) PresizeLike(previous *Table) {
	type size struct {
		chain         string
		entries, keys int
	}
	var sizes []size
	previous.mu.RLock()
	for name, c := range previous.chains {
		if len(c.entries) >= presizeEntriesMin && len(sizes) < presizeChainsMax {
			sizes = append(sizes, size{name, len(c.entries), c.keys.count})
		}
	}
	stateKeys := len(previous.state)
	previous.mu.RUnlock()
	if len(sizes) == 0 && stateKeys < presizeEntriesMin {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.lastLSN != 0 {
		return
	}
	if stateKeys >= presizeEntriesMin && len(m.state) == 0 {
		// A workload that puts a state key per commit (a request's
		// record) fills the map without growing it step by step.
		m.state = make(map[string]*memState, stateKeys)
	}
	for _, s := range sizes {
		c := &memChain{entries: make([]Entry, 0, s.entries)}
		c.keys.reserve(s.keys)
		m.chains[s.chain] = c
	}
}

func (m *Table) Size() int64 {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.sizeBytes
}

func (m *Table) Empty() bool {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.lastLSN == 0
}

// FirstLSN is the LSN of the first commit the table holds (0 when empty).
func (m *Table) FirstLSN() uint64 { return m.firstLSN }

// LastLSN is the LSN of the last commit the table holds (0 when empty).
func (m *Table) LastLSN() uint64 { return m.lastLSN }

// visible is how many of c's entries a view as of asOf sees.
func (c *memChain) visible(asOf uint64) int {
	if n := len(c.entries); n == 0 || c.entries[n-1].LSN <= asOf {
		return n // every entry: a writer's view, or a reader's of a durable table
	}
	return sort.Search(len(c.entries), func(i int) bool { return c.entries[i].LSN > asOf })
}

// Head returns the chain's newest entry as of asOf.
func (m *Table) Head(chain string, asOf uint64) (storage.Head, bool) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	c := m.chains[chain]
	if c == nil {
		return storage.Head{}, false
	}
	n := c.visible(asOf)
	if n == 0 {
		return storage.Head{}, false
	}
	return c.entries[n-1].Head, true
}

func (m *Table) Entry(chain string, seq, asOf uint64) ([]byte, bool) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	c := m.chains[chain]
	if c == nil || len(c.entries) == 0 || seq < c.entries[0].Seq {
		return nil, false
	}
	i := seq - c.entries[0].Seq
	if i >= uint64(len(c.entries)) || c.entries[i].LSN > asOf {
		return nil, false
	}
	return c.entries[i].Data, true
}

func (m *Table) LookupKey(chain, key string, asOf uint64) (uint64, bool) {
	return m.LookupKeyHash(chain, key, KeyHash(key), asOf)
}

// LookupKeyHash is lookupKey of a key whose keyHash the caller has.
func (m *Table) LookupKeyHash(chain, key string, hash, asOf uint64) (uint64, bool) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	c := m.chains[chain]
	if c == nil {
		return 0, false
	}
	return c.lookupKeyHash(key, hash, asOf)
}

// lookupKeyHash returns the seq of the chain's entry with key (whose
// keyHash is hash) that a view as of asOf sees. The caller holds the
// table's lock.
func (c *memChain) lookupKeyHash(key string, hash, asOf uint64) (uint64, bool) {
	i, ok := c.keys.Find(hash, key, c.entries)
	if !ok || c.entries[i].LSN > asOf {
		return 0, false
	}
	return c.entries[i].Seq, true
}

// EntriesChunk copies up to limit of the chain's entries with seq >= from
// that a view as of asOf sees.
func (m *Table) EntriesChunk(chain string, from, asOf uint64, limit int, out []Entry) []Entry {
	m.mu.RLock()
	defer m.mu.RUnlock()
	c := m.chains[chain]
	if c == nil || len(c.entries) == 0 {
		return out
	}
	n := c.visible(asOf)
	first := c.entries[0].Seq
	i := 0
	if from > first {
		i = int(min(from-first, uint64(n)))
	}
	end := min(n, i+limit)
	return append(out, c.entries[i:end]...)
}

// chainNames returns the names >= from of the chains with an entry visible
// as of asOf, with their heads.
func (m *Table) ChainHeads(from string, asOf uint64, into map[string]storage.Head) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	for name, c := range m.chains {
		if name < from {
			continue
		}
		if n := c.visible(asOf); n > 0 {
			if h, ok := into[name]; !ok || h.Seq < c.entries[n-1].Seq {
				into[name] = c.entries[n-1].Head
			}
		}
	}
}

// StateGet returns the newest version of key as of asOf; found is false
// when the table has none.
func (m *Table) StateGet(key []byte, asOf uint64) (StateVersion, bool) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	s := m.state[string(key)]
	if s == nil {
		return StateVersion{}, false
	}
	return s.visible(asOf)
}

func (s *memState) visible(asOf uint64) (StateVersion, bool) {
	for i := len(s.versions) - 1; i >= 0; i-- {
		if s.versions[i].LSN <= asOf {
			return s.versions[i], true
		}
	}
	return StateVersion{}, false
}

// StateItem is a state key with the version a scan sees.
type StateItem struct {
	Key     []byte
	Value   []byte
	Deleted bool
}

// StateChunk copies up to limit state items in [start, end) (end nil: no
// bound) in key order, or descending when reverse, visible as of asOf.
func (m *Table) StateChunk(start, end []byte, reverse bool, asOf uint64, limit int, out []StateItem) []StateItem {
	m.mu.RLock()
	defer m.mu.RUnlock()
	m.stateKeys.scan(string(start), end, reverse, func(key string, s *memState) bool {
		v, ok := s.visible(asOf)
		if ok {
			out = append(out, StateItem{Key: []byte(key), Value: v.Value, Deleted: v.Deleted})
		}
		return len(out) < limit
	})
	return out
}

// PreparedKey is one key of a batch looked up at once (the backend's
// PrepareKeys): its keyHash, and what the committed data of the
// transaction's view holds for it.
type PreparedKey struct {
	Chain, Key string
	Hash       uint64
	Seq        uint64 // the entry that holds the key, when found
	Found      bool
	// Known is set when the lookup finished; a key left unknown (too
	// long, or the file failed) is looked up as if it were not prepared,
	// which reports the failure.
	Known bool
}

// LookupPrepared marks the keys of keys the table holds as of asOf as
// found, under one hold of its lock.
func (m *Table) LookupPrepared(keys []PreparedKey, asOf uint64) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	// The chain looked up last: keys of one chain come in runs. It is
	// compared with each key's own chain, not the previous key's, which
	// may have been skipped.
	var c *memChain
	chain, looked := "", false
	for i := range keys {
		k := &keys[i]
		if !k.Known || k.Found {
			continue
		}
		if !looked || k.Chain != chain {
			c, chain, looked = m.chains[k.Chain], k.Chain, true
		}
		if c == nil {
			continue
		}
		k.Seq, k.Found = c.lookupKeyHash(k.Key, k.Hash, asOf)
	}
}

// orderedKeys is an insert-only ordered map of strings to values (a state
// key's versions), kept as sorted chunks of at most orderedChunkMax items
// in key order: an insert binary-searches the chunks' first keys, then its
// chunk, and moves at most a chunk's items (a full chunk splits in two) and
// the chunk list's slice headers. Its cost stays O(log n + orderedChunkMax)
// however many keys the table holds; a single sorted slice merged every few
// hundred keys copied the whole set each time, which a workload that puts
// many new state keys (an outbox: a record and index keys per message) paid
// quadratically. A scan hands each key's value over, so that it looks no
// key up in a map.
type orderedKeys[V any] struct {
	chunks [][]orderedItem[V]
}

type orderedItem[V any] struct {
	key   string
	value V
}

const orderedChunkMax = 512

func compareItem[V any](it orderedItem[V], key string) int { return strings.Compare(it.key, key) }

// chunkOf returns the index of the chunk key belongs in: the last whose
// first key is <= key, or 0.
func (o *orderedKeys[V]) chunkOf(key string) int {
	c := sort.Search(len(o.chunks), func(i int) bool { return o.chunks[i][0].key > key }) - 1
	return max(c, 0)
}

// insert adds key with value; a key already held keeps its value.
func (o *orderedKeys[V]) insert(key string, value V) {
	it := orderedItem[V]{key, value}
	if len(o.chunks) == 0 {
		o.chunks = [][]orderedItem[V]{{it}}
		return
	}
	c := o.chunkOf(key)
	ch := o.chunks[c]
	i, found := slices.BinarySearchFunc(ch, key, compareItem[V])
	if found {
		return
	}
	ch = slices.Insert(ch, i, it)
	if len(ch) <= orderedChunkMax {
		o.chunks[c] = ch
		return
	}
	half := len(ch) / 2
	right := slices.Clone(ch[half:])
	clear(ch[half:]) // the left chunk's spare room holds no value
	o.chunks[c] = ch[:half:half]
	o.chunks = slices.Insert(o.chunks, c+1, right)
}

// scan calls fn with the keys in [start, end) and their values in order
// (descending when reverse) until fn returns false.
func (o *orderedKeys[V]) scan(start string, end []byte, reverse bool, fn func(string, V) bool) {
	if len(o.chunks) == 0 {
		return
	}
	if !reverse {
		c := o.chunkOf(start)
		i, _ := slices.BinarySearchFunc(o.chunks[c], start, compareItem[V])
		for ; c < len(o.chunks); c, i = c+1, 0 {
			for _, it := range o.chunks[c][i:] {
				if end != nil && strings.Compare(it.key, string(end)) >= 0 || !fn(it.key, it.value) {
					return
				}
			}
		}
		return
	}
	c, i := len(o.chunks)-1, len(o.chunks[len(o.chunks)-1])
	if end != nil {
		c = o.chunkOf(string(end))
		i, _ = slices.BinarySearchFunc(o.chunks[c], string(end), compareItem[V])
	}
	for ; c >= 0; c-- {
		ch := o.chunks[c]
		if i < 0 {
			i = len(ch)
		}
		for j := i - 1; j >= 0; j-- {
			if ch[j].key < start || !fn(ch[j].key, ch[j].value) {
				return
			}
		}
		i = -1
	}
}

// Check verifies that a replayed commit's appends continue the chains the
// table holds, so that a damaged log is an error, not a panic of apply.
func (m *Table) Check(operations []commitrec.Operation) error {
	m.mu.RLock()
	defer m.mu.RUnlock()
	last := map[string]uint64{}
	for i := range operations {
		o := &operations[i]
		if o.Kind != commitrec.KindAppend {
			continue
		}
		previous, ok := last[o.Chain]
		if !ok {
			if c := m.chains[o.Chain]; c != nil && len(c.entries) > 0 {
				previous, ok = c.entries[len(c.entries)-1].Seq, true
			}
		}
		if ok && o.Seq != previous+1 {
			return fmt.Errorf("%w: chain %q: seq %d after %d", storage.ErrCorrupt, o.Chain, o.Seq, previous)
		}
		last[o.Chain] = o.Seq
	}
	return nil
}
