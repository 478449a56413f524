package chain

import (
	"context"
	"encoding/binary"

	"github.com/ledgerworks/ledger/chain/internal/workpool"
	"github.com/ledgerworks/ledger/internal/blake3batch"
)

// Verify reads a chain on the calling goroutine and hashes its entries in a
// pool of workers, one per CPU (internal/workpool): the hash of an entry
// does not depend on the entries before it (the link check compares stored
// hashes), so only the cheap checks need seq order.
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
	hash := func(scratch *verifyScratch, items []verifyItem) { scratch.hashItems(chain, items) }
	deliver := func(items []verifyItem) error {
		var e Entry
		for i := range items {
			it := &items[i]
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
	p := workpool.New(workpool.Options{BatchSize: verifyBatchSize, BatchesPerWorker: verifyBatchesPerWorker}, hash, deliver)
	defer p.Close() // the workers read the transaction's pages
	for rec, err := range tx.stx.Entries(ctx, chain, 1) {
		if err != nil {
			return storageError(err)
		}
		if err := p.Add(verifyItem{seq: rec.Seq, data: rec.Data}); err != nil {
			return err
		}
	}
	return p.Finish()
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
