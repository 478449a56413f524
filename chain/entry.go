package chain

import (
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"sync"
	"unsafe"

	"github.com/zeebo/blake3"
)

// HashSize is the size of a BLAKE3-256 hash in bytes.
const HashSize = 32

// Domain-separation prefixes of Format v1 (docs/FORMAT.md).
const (
	domainGenesis = "ledger/genesis/v1"
	domainEntry   = "ledger/entry/v1"
	domainRequest = "ledger/request/v1"
)

// Hash is a BLAKE3-256 digest.
type Hash [HashSize]byte

// String returns the hash as 64 lowercase hex digits.
func (h Hash) String() string { return hex.EncodeToString(h[:]) }

// ParseHash parses 64 hex digits.
func ParseHash(s string) (Hash, error) {
	var h Hash
	if len(s) != 2*HashSize {
		return h, fmt.Errorf("hash %q: want %d hex digits", s, 2*HashSize)
	}
	if _, err := hex.Decode(h[:], []byte(s)); err != nil {
		return h, fmt.Errorf("hash %q: %v", s, err)
	}
	return h, nil
}

// Entry is one link of a chain.
type Entry struct {
	Chain          string
	Seq            uint64
	PrevHash       Hash
	TimeUnixNano   int64
	IdempotencyKey string
	Type           string
	Payload        []byte
	Hash           Hash
}

// Request is what a caller asks to append.
type Request struct {
	Chain          string
	IdempotencyKey string
	Type           string
	Payload        []byte
}

// Result is the outcome of one append: the entry, and whether it already
// existed (a replay of an earlier request with the same key).
type Result struct {
	Entry    Entry
	Replayed bool
}

// Head is the newest entry of a chain. An empty chain has Seq 0 and the
// chain's genesis hash.
type Head struct {
	Chain        string
	Seq          uint64
	Hash         Hash
	TimeUnixNano int64
}

var hasherPool = sync.Pool{New: func() any { return blake3.New() }}

// hashParts hashes the concatenation of parts without copying them.
func hashParts(parts ...[]byte) Hash {
	h := hasherPool.Get().(*blake3.Hasher)
	h.Reset()
	for _, p := range parts {
		h.Write(p)
	}
	var sum Hash
	h.Sum(sum[:0])
	hasherPool.Put(h)
	return sum
}

func lengthPrefix(n int) []byte {
	return binary.BigEndian.AppendUint32(nil, uint32(n))
}

// Genesis is the prev_hash of a chain's first entry:
// BLAKE3-256("ledger/genesis/v1" || 0x00 || lp(chain)).
func Genesis(chain string) Hash {
	return hashParts([]byte(domainGenesis), []byte{0}, lengthPrefix(len(chain)), []byte(chain))
}

// Fingerprint identifies a request for idempotency: two appends with one key
// are the same request exactly when their fingerprints are equal.
// BLAKE3-256("ledger/request/v1" || 0x00 || lp(type) || lp(payload)).
func Fingerprint(typ string, payload []byte) Hash {
	return hashParts([]byte(domainRequest), []byte{0},
		lengthPrefix(len(typ)), []byte(typ), lengthPrefix(len(payload)), payload)
}

// ComputeHash returns the Format v1 hash of every field of e but Hash.
func (e *Entry) ComputeHash() Hash {
	var fixed [len(domainEntry) + 1 + 8 + HashSize + 8]byte
	n := copy(fixed[:], domainEntry)
	n++ // 0x00
	binary.BigEndian.PutUint64(fixed[n:], e.Seq)
	n += 8
	n += copy(fixed[n:], e.PrevHash[:])
	binary.BigEndian.PutUint64(fixed[n:], uint64(e.TimeUnixNano))
	return hashParts(fixed[:],
		lengthPrefix(len(e.Chain)), []byte(e.Chain),
		lengthPrefix(len(e.IdempotencyKey)), []byte(e.IdempotencyKey),
		lengthPrefix(len(e.Type)), []byte(e.Type),
		lengthPrefix(len(e.Payload)), e.Payload)
}

// Fingerprint returns the fingerprint of the request the entry recorded.
func (e *Entry) Fingerprint() Hash { return Fingerprint(e.Type, e.Payload) }

// Head returns the head a chain has when e is its newest entry.
func (e *Entry) Head() Head {
	return Head{Chain: e.Chain, Seq: e.Seq, Hash: e.Hash, TimeUnixNano: e.TimeUnixNano}
}

func unsafeString(b []byte) string { return unsafe.String(unsafe.SliceData(b), len(b)) }

// entryHash is Entry.ComputeHash over fields that may alias stored bytes,
// in one contiguous buffer and one call: Format v1 hashes the same bytes
// either way, without the allocations of hashing field by field.
func entryHash[Text string | []byte](buf []byte, chain string, seq uint64, prevHash *Hash, timeUnixNano int64,
	key, typ Text, payload []byte) (Hash, []byte) {
	buf = appendHashInput(buf[:0], chain, seq, prevHash, timeUnixNano, key, typ, payload)
	return blake3.Sum256(buf), buf
}

// appendHashInput appends an entry's Format v1 hash input to buf.
func appendHashInput[Text string | []byte](buf []byte, chain string, seq uint64, prevHash *Hash, timeUnixNano int64,
	key, typ Text, payload []byte) []byte {
	buf = append(buf, domainEntry...)
	buf = append(buf, 0)
	buf = binary.BigEndian.AppendUint64(buf, seq)
	buf = append(buf, prevHash[:]...)
	buf = binary.BigEndian.AppendUint64(buf, uint64(timeUnixNano))
	buf = binary.BigEndian.AppendUint32(buf, uint32(len(chain)))
	buf = append(buf, chain...)
	buf = binary.BigEndian.AppendUint32(buf, uint32(len(key)))
	buf = append(buf, key...)
	buf = binary.BigEndian.AppendUint32(buf, uint32(len(typ)))
	buf = append(buf, typ...)
	buf = binary.BigEndian.AppendUint32(buf, uint32(len(payload)))
	return append(buf, payload...)
}

// hashBuffers recycles the buffers of hashOf.
var hashBuffers = sync.Pool{New: func() any { return new([]byte) }}

// hashOf is e.ComputeHash() through entryHash.
func hashOf(e *Entry) Hash {
	buf := hashBuffers.Get().(*[]byte)
	var h Hash
	h, *buf = entryHash(*buf, e.Chain, e.Seq, &e.PrevHash, e.TimeUnixNano, e.IdempotencyKey, e.Type, e.Payload)
	if cap(*buf) <= 64<<10 { // a huge payload's buffer is not kept
		hashBuffers.Put(buf)
	}
	return h
}
