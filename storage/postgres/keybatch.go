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
		var (
			refs     = make([]storage.KeyRef, storage.KeyBatchSizeMax)
			digests  = make([][storage.KeyDigestSize]byte, storage.KeyBatchSizeMax)
			digester storage.KeyDigester
		)
		err := t.scanKeyPages(ctx, chain, KeyBatchScanPageSize, func(seqs []uint64, keys []string) bool {
			for start := 0; start < len(keys); start += storage.KeyBatchSizeMax {
				end := min(start+storage.KeyBatchSizeMax, len(keys))
				batch := refs[:end-start]
				digester.Digest(digests, keys[start:end])
				for i := range batch {
					batch[i] = storage.KeyRef{Digest: digests[i], Seq: seqs[start+i]}
				}
				if !yield(batch, nil) {
					return false
				}
			}
			return true
		})
		if err != nil {
			yield(nil, err)
		}
	}
}

// scanKeyPages pages through the chain's keyed rows by seq, pageSize at a
// time, and hands each page's seqs and keys to page until it returns
// false; the slices are reused for the next page. It returns the first
// error. The transaction's buffered appends are sent first, so a writable
// transaction sees its own.
func (t *tx) scanKeyPages(ctx context.Context, chain string, pageSize int, page func(seqs []uint64, keys []string) bool) error {
	if unstorable(chain) {
		return nil
	}
	var after uint64
	seqs := make([]uint64, 0, pageSize)
	keys := make([]string, 0, pageSize)
	for {
		if err := t.usable(); err != nil {
			return err
		}
		err := t.run(ctx, "scan keys", t.pending(), func(b *pgx.Batch) {
			seqs, keys = seqs[:0], keys[:0]
			b.Queue(sqlScanKeys, chain, int64(after), pageSize).Query(func(rows pgx.Rows) error {
				return scanKeyRows(rows, &seqs, &keys)
			})
		})
		if err != nil {
			return err
		}
		if !page(seqs, keys) || len(keys) < pageSize {
			return nil
		}
		after = seqs[len(seqs)-1]
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
