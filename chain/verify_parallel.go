package chain

import (
	"context"
	"encoding/binary"
	"runtime"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/zeebo/blake3"

	"github.com/ledgerworks/ledger/internal/blake3batch"
)

// Verify reads a chain on the calling goroutine and hashes its entries in a
// pool of workers, one per CPU: the hash of an entry does not depend on the
// entries before it (the link check compares stored hashes), so only the
// cheap checks need seq order. Batches travel in a bounded queue, so memory
// stays constant however long the chain.
const (
	// verifyBatchSize is how many entries one worker hashes per hand-off.
	verifyBatchSize = 256
	// verifyBatchesPerWorker bounds the batches in flight per worker.
	verifyBatchesPerWorker = 4
)

// verifyItem is one stored entry on its way through the pool.
// Once hashed, an item without err holds a record DecodeRecord accepts,
// and its fields are read in place (prevHash, hash, timeUnixNano, key): a
// chunk checks an entry without building an Entry for it.
type verifyItem struct {
	seq        uint64
	data       []byte // stored bytes, valid while the read transaction lasts
	calculated Hash
	err        error // the entry is undecodable
}

// prevHash, hash, timeUnixNano and key read a decodable item's fields
// where they are stored.
func (it *verifyItem) prevHash() *Hash {
	return (*Hash)(it.data[recordPrevHashOffset:recordHashOffset])
}

func (it *verifyItem) hash() *Hash { return (*Hash)(it.data[recordHashOffset:recordFieldsOffset]) }

func (it *verifyItem) timeUnixNano() int64 {
	return int64(binary.BigEndian.Uint64(it.data[recordTimeOffset:recordPrevHashOffset]))
}

// key aliases the stored bytes, like every field fn must not keep.
func (it *verifyItem) key() string {
	n := binary.BigEndian.Uint32(it.data[recordFieldsOffset:])
	return unsafeString(it.data[recordFieldsOffset+4 : recordFieldsOffset+4+uint64(n)])
}

// entry builds the item's Entry, without its type and payload, for the
// checks that take one.
func (it *verifyItem) entry(chain string) Entry {
	return Entry{Chain: chain, Seq: it.seq, PrevHash: *it.prevHash(), TimeUnixNano: it.timeUnixNano(),
		IdempotencyKey: it.key(), Hash: *it.hash()}
}

// verifyBatch is a batch of items on its way through the pool. The reader
// that needs it next may hash it itself when no worker has begun it, so a
// busy machine that does not schedule the workers is no slower than one
// goroutine. state is generation<<1 | claimed: a batch is reused, and a
// worker holding an old generation's reference cannot claim it.
type verifyBatch struct {
	items      []verifyItem
	done       chan struct{}
	generation uint64
	state      atomic.Uint64
}

type verifyBatchRef struct {
	batch      *verifyBatch
	generation uint64
}

// claim reports whether the caller may hash the batch.
func (b *verifyBatch) claim(generation uint64) bool {
	return b.state.CompareAndSwap(generation<<1, generation<<1|1)
}

// hash hashes a claimed batch and marks it done.
func (b *verifyBatch) hash(chain string, scratch *verifyScratch) {
	scratch.hashItems(chain, b.items)
	close(b.done)
}

// verifyScratch is one goroutine's memory for hashing batches: the hash
// inputs of a batch's entries are built back to back in inputs and hashed
// together by blake3batch, several entries at once (eight lanes of AVX2
// on amd64), instead of one blake3.Sum256 call each.
type verifyScratch struct {
	inputs   []byte   // the batch's single-chunk hash inputs, back to back
	pending  []int    // the index in the batch of each input
	messages [][]byte // the inputs, sliced from inputs
	hashes   [][blake3batch.Size]byte
	large    []byte // the hash input of an entry longer than one chunk
}

// hashItems decodes items' stored bytes in place and computes their hashes.
func (s *verifyScratch) hashItems(chain string, items []verifyItem) {
	s.inputs, s.messages, s.pending = s.inputs[:0], s.messages[:0], s.pending[:0]
	header := recordHashHeaderSize(chain)
	for i := range items {
		it := &items[i]
		// An input longer than a chunk gains nothing from the lanes, and
		// would hold a large payload's copy in inputs: it is hashed alone,
		// as is a record validRecord rejects, which hashItem words.
		if !validRecord(it.data) || header+len(it.data)-recordFieldsOffset > blake3batch.ChunkSize {
			s.large = hashItem(chain, it, s.large)
			continue
		}
		it.err = nil
		// A message is sliced as soon as its input is built, without a
		// second pass: when inputs grows, the messages before still slice
		// the old array, whose bytes are the same.
		start := len(s.inputs)
		s.inputs = appendRecordHashInput(s.inputs, chain, it.seq, it.data)
		s.messages = append(s.messages, s.inputs[start:len(s.inputs):len(s.inputs)])
		s.pending = append(s.pending, i)
	}
	if cap(s.hashes) < len(s.messages) {
		s.hashes = make([][blake3batch.Size]byte, len(s.messages))
	}
	s.hashes = s.hashes[:len(s.messages)]
	blake3batch.Sum256(s.hashes, s.messages)
	for j, i := range s.pending {
		items[i].calculated = s.hashes[j]
	}
}

// scanEntries streams the chain's stored entries to fn in seq order, each
// decoded (without copying its key, type or payload, which fn must not
// keep) and with its Format v1 hash computed; an undecodable entry comes
// with its error instead. It runs inside tx, which must stay open until it
// returns.
func (db *DB) scanEntries(ctx context.Context, tx *Tx, chain string,
	fn func(seq uint64, e *Entry, calculated Hash, err error) error) (err error) {
	workers := max(runtime.GOMAXPROCS(0), 1)
	var (
		work    chan verifyBatchRef
		wg      sync.WaitGroup
		queue   []*verifyBatch // sent to the workers, in seq order
		free    []*verifyBatch
		scratch verifyScratch
		current = &verifyBatch{items: make([]verifyItem, 0, verifyBatchSize)}
	)
	defer func() {
		if work != nil {
			close(work)
			wg.Wait() // the workers read the transaction's pages
		}
	}()
	deliver := func(b *verifyBatch) error {
		var e Entry
		for i := range b.items {
			it := &b.items[i]
			ep := &e
			if it.err == nil {
				e = it.entry(chain)
			} else {
				ep = nil
			}
			if err := fn(it.seq, ep, it.calculated, it.err); err != nil {
				return err
			}
		}
		return nil
	}
	oldest := func() error {
		b := queue[0]
		if b.claim(b.generation) {
			b.hash(chain, &scratch)
		}
		// While a worker hashes the oldest batch, hash the ones no worker
		// has begun.
		for _, other := range queue[1:] {
			select {
			case <-b.done:
			default:
				if other.claim(other.generation) {
					other.hash(chain, &scratch)
				}
				continue
			}
			break
		}
		<-b.done
		queue = queue[1:]
		err := deliver(b)
		b.items = b.items[:0]
		b.generation++
		free = append(free, b)
		return err
	}
	send := func() error {
		if work == nil {
			work = make(chan verifyBatchRef, workers*verifyBatchesPerWorker)
			for range workers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					var scratch verifyScratch
					for ref := range work {
						if ref.batch.claim(ref.generation) {
							ref.batch.hash(chain, &scratch)
						}
					}
				}()
			}
		}
		current.done = make(chan struct{})
		current.state.Store(current.generation << 1)
		work <- verifyBatchRef{batch: current, generation: current.generation}
		queue = append(queue, current)
		if len(free) > 0 {
			current, free = free[len(free)-1], free[:len(free)-1]
		} else {
			current = &verifyBatch{items: make([]verifyItem, 0, verifyBatchSize)}
		}
		if len(queue) >= workers*verifyBatchesPerWorker {
			return oldest()
		}
		return nil
	}
	for rec, err := range tx.stx.Entries(ctx, chain, 1) {
		if err != nil {
			return storageError(err)
		}
		current.items = append(current.items, verifyItem{seq: rec.Seq, data: rec.Data})
		if len(current.items) == verifyBatchSize {
			if err := send(); err != nil {
				return err
			}
		}
	}
	for len(queue) > 0 {
		if err := oldest(); err != nil {
			return err
		}
	}
	// A short tail (or a short chain) is hashed here: no hand-off is worth it.
	scratch.hashItems(chain, current.items)
	return deliver(current)
}

// hashItem decodes an item's stored bytes in place and computes its hash,
// one item at a time.
func hashItem(chain string, it *verifyItem, scratch []byte) []byte {
	if f, ok := decodeItem(chain, it); ok {
		it.calculated, scratch = entryHash(scratch, chain, it.seq, &f.prevHash, f.timeUnixNano, f.key, f.typ, f.payload)
	}
	return scratch
}

// decodeItem decodes an item's stored bytes in place and returns its fields
// for hashing, or reports false when it has done all of the item itself:
// a record decodeFields does not accept is decoded, or rejected, and
// hashed by DecodeRecord and ComputeHash. Either way an item left without
// err holds a record of DecodeRecord's shape, whose fields its methods
// read in place.
func decodeItem(chain string, it *verifyItem) (recordFields, bool) {
	it.err = nil
	f, ok := decodeFields(it.data)
	if !ok {
		// The exact failure, as DecodeRecord words it.
		if e, err := DecodeRecord(chain, it.seq, it.data); err != nil {
			it.err = err
		} else {
			it.calculated = e.ComputeHash()
		}
		return f, false
	}
	return f, true
}

// Where decodeFields finds the fixed fields of a stored entry, and where
// its key, type and payload begin, each with its 4-byte length.
const (
	recordTimeOffset     = 1
	recordPrevHashOffset = recordTimeOffset + 8
	recordHashOffset     = recordPrevHashOffset + HashSize
	recordFieldsOffset   = recordHashOffset + HashSize
)

// appendRecordHashInput appends the Format v1 hash input of a stored entry
// that decodeFields accepted: what appendHashInput appends for its fields,
// in fewer copies. A record holds key, type and payload as lp(key) ||
// lp(type) || lp(payload), exactly the end of the hash input, and its time
// big-endian like the input: those are copied as they are stored.
func appendRecordHashInput(buf []byte, chain string, seq uint64, data []byte) []byte {
	buf = append(buf, domainEntry...)
	buf = append(buf, 0)
	buf = binary.BigEndian.AppendUint64(buf, seq)
	buf = append(buf, data[recordPrevHashOffset:recordHashOffset]...)
	buf = append(buf, data[recordTimeOffset:recordPrevHashOffset]...)
	buf = binary.BigEndian.AppendUint32(buf, uint32(len(chain)))
	buf = append(buf, chain...)
	return append(buf, data[recordFieldsOffset:]...)
}

// recordHashHeaderSize is the size of the part of a stored entry's hash
// input that appendRecordHashInput builds: the rest, lp(key) || lp(type) ||
// lp(payload), is the record's bytes from recordFieldsOffset.
func recordHashHeaderSize(chain string) int {
	return len(domainEntry) + 1 + 8 + HashSize + 8 + 4 + len(chain)
}

// validRecord reports whether decodeFields accepts data, without building
// its fields: the check of every record a verify hashes in a batch, where
// building and returning recordFields (zeroing it, copying both hashes)
// was a third of the decoding. The three lengths are followed as offsets
// into data, each checked against its limit and against len(data), and
// only key and type are sliced: cutting each field with its rest was a
// third of validRecord's instructions.
func validRecord(data []byte) bool {
	if len(data) < recordFixedSize || data[0] != recordVersion {
		return false
	}
	size := uint64(len(data))
	keyLength := uint64(binary.BigEndian.Uint32(data[recordFieldsOffset:]))
	typeAt := recordFieldsOffset + 4 + keyLength // where the type's length is
	if keyLength > IdempotencyKeyLengthMax || typeAt+4 > size {
		return false
	}
	typeLength := uint64(binary.BigEndian.Uint32(data[typeAt:]))
	payloadAt := typeAt + 4 + typeLength
	if typeLength > TypeLengthMax || payloadAt+4 > size {
		return false
	}
	payloadLength := uint64(binary.BigEndian.Uint32(data[payloadAt:]))
	if payloadLength > PayloadSizeLimit || payloadAt+4+payloadLength != size {
		return false
	}
	key, typ := data[recordFieldsOffset+4:typeAt], data[typeAt+4:payloadAt]
	// The limits held both to their lengthMax: printable ASCII, what keys
	// and types nearly always are, then needs only the type's lengthMin,
	// without validText's calls.
	if typeLength != 0 && printableASCII(key) && printableASCII(typ) {
		return true
	}
	return validText("idempotency_key", key, 0, IdempotencyKeyLengthMax, ErrInvalidKey) &&
		validText("type", typ, 1, TypeLengthMax, ErrInvalidType)
}

// recordFields are the fields of a stored entry, aliasing its bytes.
type recordFields struct {
	timeUnixNano int64
	prevHash     Hash
	hash         Hash
	key, typ     []byte
	payload      []byte
}

// decodeFields is DecodeRecord without copies: it accepts exactly the
// records DecodeRecord accepts (the same shape, limits and text rules) and
// reports false for any other, whose error DecodeRecord then words.
func decodeFields(data []byte) (recordFields, bool) {
	var f recordFields
	if len(data) < recordFixedSize || data[0] != recordVersion {
		return f, false
	}
	f.timeUnixNano = int64(binary.BigEndian.Uint64(data[recordTimeOffset:]))
	f.prevHash = Hash(data[recordPrevHashOffset:recordHashOffset])
	f.hash = Hash(data[recordHashOffset:recordFieldsOffset])
	rest := data[recordFieldsOffset:]
	var fields [3][]byte
	limits := [3]int{IdempotencyKeyLengthMax, TypeLengthMax, PayloadSizeLimit}
	for i := range fields {
		if len(rest) < 4 {
			return f, false
		}
		n := binary.BigEndian.Uint32(rest)
		rest = rest[4:]
		if uint64(n) > uint64(limits[i]) || uint64(n) > uint64(len(rest)) {
			return f, false
		}
		fields[i], rest = rest[:n], rest[n:]
	}
	if len(rest) != 0 {
		return f, false
	}
	f.key, f.typ, f.payload = fields[0], fields[1], fields[2]
	if !validText("idempotency_key", f.key, 0, IdempotencyKeyLengthMax, ErrInvalidKey) ||
		!validText("type", f.typ, 1, TypeLengthMax, ErrInvalidType) {
		return f, false
	}
	return f, true
}

// validText applies validateText's rules to stored bytes. Printable ASCII,
// what keys and types nearly always are, is valid UTF-8 without control
// characters, so it is checked in one pass; anything else goes through
// validateText itself.
func validText(field string, b []byte, lengthMin, lengthMax int, sentinel error) bool {
	if len(b) >= lengthMin && len(b) <= lengthMax && printableASCII(b) {
		return true
	}
	// The view is read, never kept, while the bytes are alive.
	return validateText(field, unsafeString(b), lengthMin, lengthMax, sentinel) == nil
}

// printableASCII reports whether every byte of b is in 0x20..0x7e. It
// tests eight bytes per word, two words per step (a key is often 32 or 64
// hex digits), with the byte-range tests of "Bit Twiddling Hacks": a byte
// below 0x20 borrows into its top bit when 0x20 is subtracted, a byte of
// 0x7f carries into it when 1 is added, and a byte above has it set
// already. A borrow or carry into the next byte comes only from a byte
// that fails, so it never fails a word that passes.
func printableASCII(b []byte) bool {
	const (
		ones = 0x0101010101010101
		tops = 0x8080808080808080
	)
	if len(b) < 8 {
		for _, c := range b {
			if c < 0x20 || c >= 0x7f {
				return false
			}
		}
		return true
	}
	// The words are tested together and the result looked at once: a
	// branch per word cost more than the test. The last word may overlap
	// the one before it, which tests some bytes twice instead of one at a
	// time.
	var bad uint64
	last := binary.LittleEndian.Uint64(b[len(b)-8:])
	bad |= (last - 0x20*ones) | (last + ones) | last
	for ; len(b) >= 16; b = b[16:] {
		w, x := binary.LittleEndian.Uint64(b), binary.LittleEndian.Uint64(b[8:])
		bad |= (w - 0x20*ones) | (w + ones) | w | (x - 0x20*ones) | (x + ones) | x
	}
	if len(b) >= 8 {
		w := binary.LittleEndian.Uint64(b)
		bad |= (w - 0x20*ones) | (w + ones) | w
	}
	return bad&tops == 0
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
