package bolt

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"iter"

	"github.com/ledgerworks/ledger/storage"
	"github.com/ledgerworks/ledger/storage/bolt/internal/keyindex"
	"github.com/ledgerworks/ledger/storage/bolt/internal/keyrun"
	"github.com/ledgerworks/ledger/storage/bolt/internal/mapscan"
)

// ScanKeys reads the chain's part of every piece of the index in turn: the
// keys this write transaction added (still in memory), the recent keys
// bucket (exact keys, digested here) and each run. A run is sorted by
// chain id, so the chain's records are one contiguous stretch of chunks:
// a seek to the chain id and a forward walk, sequential reads like the scan
// of the entries, and like it released from the map as it goes (see
// internal/mapscan), so that a verify's resident size does not grow with the
// index.
func (t *tx) ScanKeys(ctx context.Context, chain string) iter.Seq2[storage.KeyRef, error] {
	return func(yield func(storage.KeyRef, error) bool) {
		c, found, err := t.scannedChain(chain)
		if err != nil {
			yield(storage.KeyRef{}, err)
		}
		if !found {
			return
		}
		if !t.scanPendingKeys(c.id, yield) || !t.scanRecentKeys(chain, c.id, yield) {
			return
		}
		names, err := t.index.runs.ScanNames(t)
		if err != nil {
			yield(storage.KeyRef{}, fmt.Errorf("chain %q: %w", chain, err))
			return
		}
		var memory mapscan.Scan
		for _, name := range names {
			if !t.scanRunKeys(chain, c.id, name, &memory, yield) {
				return
			}
		}
	}
}

// scanPendingKeys yields the keys this write transaction appended; they
// reach the file at commit. It reports whether to go on.
func (t *tx) scanPendingKeys(chainID uint64, yield func(storage.KeyRef, error) bool) bool {
	for k, seq := range t.index.pending {
		if k.chainID != chainID {
			continue
		}
		if !yield(storage.KeyRef{Digest: storage.KeyDigest(k.key), Seq: seq}, nil) {
			return false
		}
	}
	return true
}

// scanRecentKeys yields the chain's keys of the recent keys bucket. It
// reports whether to go on.
func (t *tx) scanRecentKeys(chain string, chainID uint64, yield func(storage.KeyRef, error) bool) bool {
	prefix := binary.BigEndian.AppendUint64(nil, chainID)
	cur := t.keys().Cursor()
	for k, v := cur.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, v = cur.Next() {
		if len(v) != 8 {
			yield(storage.KeyRef{}, fmt.Errorf("chain %q: %w: key index value of %d bytes", chain, storage.ErrCorrupt, len(v)))
			return false
		}
		ref := storage.KeyRef{Digest: storage.KeyDigest(string(k[8:])), Seq: binary.BigEndian.Uint64(v)}
		if !yield(ref, nil) {
			return false
		}
	}
	return true
}

// scanRunKeys yields the chain's records of one run (see walkRunChunks).
// It reports whether to go on.
func (t *tx) scanRunKeys(chain string, chainID uint64, name keyrun.Name, memory *mapscan.Scan,
	yield func(storage.KeyRef, error) bool) bool {
	more, err := t.walkRunChunks(chainID, name, memory, func(chunk []byte) (bool, bool) {
		return yieldChunk(chunk, chainID, yield)
	})
	if err != nil {
		yield(storage.KeyRef{}, err)
		return false
	}
	return more
}

// walkRunChunks hands each chunk of one run that may hold the chain's
// records to each, which reports whether to go on and whether the chunk
// held a record of a greater chain id. A chunk's key is the prefix of its
// last record, so the seek to the bare chain id lands on the first chunk
// that can hold the chain's records; that chunk may begin with another
// chain's, and the walk ends at the first record of a greater chain id.
// The run's other keys (count, filter) are not 24 bytes long. It reports
// whether to go on; a damaged run is an error wrapping storage.ErrCorrupt.
func (t *tx) walkRunChunks(chainID uint64, name keyrun.Name, memory *mapscan.Scan,
	each func(chunk []byte) (more, last bool)) (bool, error) {
	b := t.index.runs.Bucket(t, name)
	if b == nil {
		return false, fmt.Errorf("%s: %w: key run %x missing", t.path, storage.ErrCorrupt, name)
	}
	cur := b.Cursor()
	first := true
	for k, v := cur.Seek(binary.BigEndian.AppendUint64(nil, chainID)); k != nil; k, v = cur.Next() {
		if len(k) != keyindex.RecordPrefixSize {
			continue
		}
		if binary.BigEndian.Uint64(k) < chainID {
			// A chunk key is its greatest record: no chunk at or after the
			// seek ends below the chain.
			return false, fmt.Errorf("%s: %w: key run %x out of order", t.path, storage.ErrCorrupt, name)
		}
		if len(v) == 0 || len(v)%keyindex.RecordSize != 0 {
			return false, fmt.Errorf("%s: %w: key run %x chunk of %d bytes", t.path, storage.ErrCorrupt, name, len(v))
		}
		if first {
			// The first chunk may begin with other chains' records: up to
			// a megabyte of them, for each chain of a verify, unless the
			// walk starts at the chain's first record.
			v = v[keyindex.SearchChunk(v, keyindex.Prefix{ChainID: chainID})*keyindex.RecordSize:]
			first = false
		}
		// A chunk of keyindex.ChunkRecords is handed on in pieces, each observed
		// as a value of its own: a mapscan.Scan reads ahead of a scan from
		// its first value and from its first look at the map, which come
		// by the bytes read, so a scan that began with a 1 MiB chunk
		// would fault most of that chunk a page at a time on a cold file.
		for o := 0; o < len(v); o += scanPieceBytes {
			piece := v[o:min(o+scanPieceBytes, len(v))]
			memory.Observe(piece)
			more, last := each(piece)
			if !more || last {
				return more, nil
			}
		}
	}
	return true, nil
}

// scanPieceBytes is the most of a chunk that walkRunChunks hands on at
// once: keyChunkRecordsV1 chunks whole, larger ones in pieces of a whole
// number of records.
const scanPieceBytes = 64 << 10

// yieldChunk yields a chunk's records of the chain. last reports that the
// chunk holds a record of a greater chain id, so no later chunk holds any
// of the chain's.
func yieldChunk(chunk []byte, chainID uint64, yield func(storage.KeyRef, error) bool) (more, last bool) {
	for o := 0; o < len(chunk); o += keyindex.RecordSize {
		rec := chunk[o : o+keyindex.RecordSize]
		switch id := binary.BigEndian.Uint64(rec); {
		case id < chainID:
			continue
		case id > chainID:
			return true, true
		}
		ref := storage.KeyRef{Digest: [KeyDigestSize]byte(rec[8:keyindex.RecordPrefixSize]), Seq: binary.BigEndian.Uint64(rec[keyindex.RecordPrefixSize:])}
		if !yield(ref, nil) {
			return false, true
		}
	}
	return true, false
}

func (g *guardedTx) ScanKeys(ctx context.Context, chain string) iter.Seq2[storage.KeyRef, error] {
	return guardedSeq(g, g.t.ScanKeys(ctx, chain))
}
