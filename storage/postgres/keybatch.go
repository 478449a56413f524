package postgres

import (
	"context"
	"encoding/binary"
	"fmt"
	"iter"
	"strconv"

	"github.com/jackc/pgx/v5"

	"github.com/ledgerworks/ledger/storage"
)

// KeyBatchScanPageSize is the number of keyed rows ScanKeyBatches fetches
// per query, and so the most it holds in memory at once (about 1 MiB of
// 40-byte keys). A verify reads a chain's whole index, and a query has a
// cost of its own: pages of KeyScanPageSize rows cost a query per
// thousand keys.
const KeyBatchScanPageSize = 16 * 1024

var _ storage.KeyBatchScanner = (*tx)(nil)

// ScanKeyBatches yields what ScanKeys yields, read in pages of
// KeyBatchScanPageSize rows, in batches of storage.KeyBatchSizeMax whose
// digests are computed side by side (storage.KeyDigester).
func (t *tx) ScanKeyBatches(ctx context.Context, chain string) iter.Seq2[[]storage.KeyRef, error] {
	return func(yield func([]storage.KeyRef, error) bool) {
		if unstorable(chain) {
			return
		}
		var (
			after    uint64
			seqs     = make([]uint64, 0, KeyBatchScanPageSize)
			keys     = make([]string, 0, KeyBatchScanPageSize)
			refs     = make([]storage.KeyRef, storage.KeyBatchSizeMax)
			digests  = make([][storage.KeyDigestSize]byte, storage.KeyBatchSizeMax)
			digester storage.KeyDigester
		)
		for {
			if err := t.usable(); err != nil {
				yield(nil, err)
				return
			}
			err := t.run(ctx, "scan keys", t.pending(), func(b *pgx.Batch) {
				seqs, keys = seqs[:0], keys[:0]
				b.Queue(sqlScanKeys, chain, int64(after), KeyBatchScanPageSize).Query(func(rows pgx.Rows) error {
					return scanKeyRows(rows, &seqs, &keys)
				})
			})
			if err != nil {
				yield(nil, err)
				return
			}
			for start := 0; start < len(keys); start += storage.KeyBatchSizeMax {
				end := min(start+storage.KeyBatchSizeMax, len(keys))
				batch := refs[:end-start]
				digester.Digest(digests, keys[start:end])
				for i := range batch {
					batch[i] = storage.KeyRef{Digest: digests[i], Seq: seqs[start+i]}
				}
				if !yield(batch, nil) {
					return
				}
			}
			if len(keys) < KeyBatchScanPageSize {
				return
			}
			after = seqs[len(seqs)-1]
		}
	}
}

// scanKeyRows appends the seq and key of each row of sqlScanKeys, decoded
// from the raw values: a verify reads millions, and pgx's Scan costs more
// per row than the decoding itself.
func scanKeyRows(rows pgx.Rows, seqs *[]uint64, keys *[]string) error {
	fields := rows.FieldDescriptions()
	if len(fields) != 2 {
		return fmt.Errorf("scan keys: %d columns, want 2", len(fields))
	}
	binarySeq := fields[0].Format == pgx.BinaryFormatCode
	for rows.Next() {
		values := rows.RawValues()
		seq, err := decodeSeq(values[0], binarySeq)
		if err != nil {
			return err
		}
		if values[1] == nil {
			return fmt.Errorf("scan keys: %w: seq %d has no key", storage.ErrCorrupt, seq)
		}
		*seqs, *keys = append(*seqs, seq), append(*keys, string(values[1]))
	}
	return rows.Err()
}

// decodeSeq decodes a bigint seq in pgx's binary or text format.
func decodeSeq(raw []byte, binaryFormat bool) (uint64, error) {
	var seq int64
	switch {
	case binaryFormat && len(raw) == 8:
		seq = int64(binary.BigEndian.Uint64(raw))
	case binaryFormat || raw == nil:
		return 0, fmt.Errorf("scan keys: a seq of %d bytes", len(raw))
	default:
		var err error
		if seq, err = strconv.ParseInt(string(raw), 10, 64); err != nil {
			return 0, fmt.Errorf("scan keys: seq: %w", err)
		}
	}
	if seq < 1 {
		return 0, fmt.Errorf("scan keys: %w: seq %d", storage.ErrCorrupt, seq)
	}
	return uint64(seq), nil
}
