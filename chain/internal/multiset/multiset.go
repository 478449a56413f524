package multiset

import (
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"math/bits"

	"github.com/ledgerworks/ledger/internal/blake3batch"
	"github.com/ledgerworks/ledger/storage"
)

// KeySize is the size of the key of the multiset hash.
const KeySize = 32

// Key is the secret key of one Verify's multiset hashes.
type Key [KeySize]byte

// NewKey draws a key from the operating system's random source.
func NewKey() (Key, error) {
	var k Key
	if _, err := rand.Read(k[:]); err != nil {
		return k, fmt.Errorf("verify: random key: %w", err)
	}
	return k, nil
}

// Sum is one side of a multiset comparison: the sum mod 2^256 of
// its elements' numbers, little-endian limbs, and how many were added.
type Sum struct {
	sum   [4]uint64
	count uint64
}

// Count is how many elements the sum holds.
func (m *Sum) Count() uint64 { return m.count }

// addHash adds one element's number: its 32 hash bytes, little-endian.
func (m *Sum) addHash(h *[32]byte) {
	var carry uint64
	for i := range m.sum {
		m.sum[i], carry = bits.Add64(m.sum[i], binary.LittleEndian.Uint64(h[8*i:]), carry)
	}
	m.count++
}

// addHashes adds the numbers of hashes, as addHash one by one does, with
// the sum held in registers across them (2% of a warm verify's CPU went to
// addHash).
func (m *Sum) addHashes(hashes [][32]byte) {
	blake3batch.AddHashes(&m.sum, hashes)
	m.count += uint64(len(hashes))
}

// add adds a sum of elements and their count, as blake3batch.Elements
// returns them.
func (m *Sum) add(sum [4]uint64, count uint64) {
	m.Merge(&Sum{sum: sum, count: count})
}

// Merge adds another partial sum of the same side.
func (m *Sum) Merge(o *Sum) {
	var carry uint64
	for i := range m.sum {
		m.sum[i], carry = bits.Add64(m.sum[i], o.sum[i], carry)
	}
	m.count += o.count
}

// Hasher maps elements to numbers, a batch at a time through
// blake3batch (many short messages per vector compression); one per
// goroutine, its buffers reused. The digest messages of keys up to
// keyBlockLengthMax bytes are laid out zero-padded at the stride of a
// block, which the lanes compress where they lie; the elements go
// through blake3batch.Elements, which hashes them and sums their numbers
// in the vector registers.
type Hasher struct {
	key      *Key
	inputs   []byte // the digest messages of long keys, back to back
	blocks   []byte // one-block messages, blake3batch.BlockSize each
	lengths  []uint8
	seqs     []uint64
	messages [][]byte
	hashes   [][blake3batch.Size]byte
	// elements sums the elements under elementsKey, which is *key once
	// elementsFor has run: a hasher is reused across verifies, each with
	// its own key, and a key is compared by value (a new key may lie
	// where an old one did).
	elements    blake3batch.Elements
	elementsKey Key
	elementsSet bool
}

// elementsFor returns mh's elements, keyed with *mh.key.
func (mh *Hasher) elementsFor() *blake3batch.Elements {
	if !mh.elementsSet || mh.elementsKey != *mh.key {
		mh.elementsKey, mh.elementsSet = *mh.key, true
		mh.elements.Reset((*[blake3batch.KeySize]byte)(&mh.elementsKey))
	}
	return &mh.elements
}

// SetKey keys the hasher's next sums with k (nil while it waits in a
// pool).
func (mh *Hasher) SetKey(k *Key) { mh.key = k }

func NewHasher(k *Key) *Hasher {
	return &Hasher{key: k}
}

// multisetElementSize is the message of one element: digest || u64be(seq),
// what blake3batch.Elements hashes (checked when the package compiles).
const multisetElementSize = storage.KeyDigestSize + 8

const _ = uint(multisetElementSize-blake3batch.ElementSize) + uint(blake3batch.ElementSize-multisetElementSize)

// keyDigestDomainWords is storage.KeyDigestDomain zero-padded to 16
// bytes, as two little-endian words; a longer domain does not compile.
var keyDigestDomainWords = func() [2]uint64 {
	const _ = uint(16 - len(storage.KeyDigestDomain))
	var b [16]byte
	copy(b[:], storage.KeyDigestDomain)
	return [2]uint64{binary.LittleEndian.Uint64(b[0:]), binary.LittleEndian.Uint64(b[8:])}
}()

// keyBlockLengthMax is the longest key whose digest message fits in one
// block.
const keyBlockLengthMax = blake3batch.BlockSize - len(storage.KeyDigestDomain)

// Sum adds the elements of items to m. When digested is false the items
// carry keys, whose digests (storage.KeyDigest) are computed first: with
// every key short enough for one block, in the same lanes as the
// elements (blake3batch.Elements.AddKeyDigests).
func (mh *Hasher) Sum(m *Sum, items []Item, digested bool) {
	e := mh.elementsFor()
	switch {
	case digested:
		for i := range items {
			e.Add(&items[i].Digest, items[i].Seq)
		}
	case mh.digestBlocks(items):
		e.AddKeyDigests(mh.blocks, mh.lengths, mh.seqs)
	default:
		mh.digestLong(items)
		for i := range items {
			e.Add((*[storage.KeyDigestSize]byte)(mh.hashes[i][:storage.KeyDigestSize]), items[i].Seq)
		}
	}
	m.add(e.Sum())
}

// size sets the lengths of mh's buffers to n messages, growing them when
// they are shorter.
func (mh *Hasher) size(n int) {
	if cap(mh.hashes) < n {
		mh.hashes = make([][blake3batch.Size]byte, n)
	}
	mh.hashes = mh.hashes[:n]
	if cap(mh.blocks) < n*blake3batch.BlockSize {
		mh.blocks = make([]byte, n*blake3batch.BlockSize)
		mh.lengths = make([]uint8, n)
		mh.seqs = make([]uint64, n)
	}
	mh.blocks, mh.lengths, mh.seqs = mh.blocks[:n*blake3batch.BlockSize], mh.lengths[:n], mh.seqs[:n]
}

// SumRefs adds index records to m, each element taken straight from its
// record: the index side's batches need no copy into keyItems first.
func (mh *Hasher) SumRefs(m *Sum, refs []storage.KeyRef) {
	e := mh.elementsFor()
	for i := range refs {
		e.Add(&refs[i].Digest, refs[i].Seq)
	}
	m.add(e.Sum())
}

// digestBlocks lays out the digest message of every item's key (domain ||
// key) zero-padded in mh.blocks, with its length and the item's seq, when
// every key is short enough for one block, as the keys of a chain nearly
// always are; it reports false, having laid out nothing, otherwise.
func (mh *Hasher) digestBlocks(items []Item) bool {
	for i := range items {
		if len(items[i].Key) > keyBlockLengthMax {
			return false
		}
	}
	mh.size(len(items))
	for i := range items {
		b := (*[blake3batch.BlockSize]byte)(mh.blocks[i*blake3batch.BlockSize:])
		// The block is cleared whole and the domain written as two
		// words (its last two bytes zero, where the key goes):
		// clearing what follows each key and copying the domain were
		// two calls per key.
		*b = [blake3batch.BlockSize]byte{}
		binary.LittleEndian.PutUint64(b[0:], keyDigestDomainWords[0])
		binary.LittleEndian.PutUint64(b[8:], keyDigestDomainWords[1])
		length := len(storage.KeyDigestDomain) + copy(b[len(storage.KeyDigestDomain):], items[i].Key)
		mh.lengths[i] = uint8(length)
		mh.seqs[i] = items[i].Seq
	}
	return true
}

// digestLong sets mh.hashes[i] to the hash whose first bytes are
// storage.KeyDigest(items[i].key), for items with keys longer than a
// block's message.
func (mh *Hasher) digestLong(items []Item) {
	mh.size(len(items))
	mh.inputs, mh.messages = mh.inputs[:0], mh.messages[:0]
	for i := range items {
		mh.inputs = append(append(mh.inputs, storage.KeyDigestDomain...), items[i].Key...)
	}
	o := 0
	for i := range items {
		size := len(storage.KeyDigestDomain) + len(items[i].Key)
		mh.messages = append(mh.messages, mh.inputs[o:o+size:o+size])
		o += size
	}
	blake3batch.Sum256(mh.hashes, mh.messages)
}

// Item is one element on its way to a worker: from the entries a key
// (aliasing the stored bytes of the scan's read transaction, which stays
// open until the checker is done) and its seq; from the index a digest and
// seq.
type Item struct {
	Key    string
	Digest [storage.KeyDigestSize]byte
	Seq    uint64
}
