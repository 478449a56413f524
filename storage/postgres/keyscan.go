package postgres

import (
	"context"
	"iter"

	"github.com/ledgerworks/ledger/storage"
)

// KeyScanPageSize is the number of keyed rows ScanKeys fetches per query,
// and so the most it holds in memory at once. Rows without a key are
// skipped by the server, so a page is mostly keys, which are short.
const KeyScanPageSize = 1024

// sqlScanKeys pages through a chain's keyed rows by seq (keyset pagination
// on the primary key): each page starts after the last seq of the one
// before, so no page is read twice however long the chain.
const sqlScanKeys = `SELECT seq, idempotency_key FROM entries
	WHERE chain_id = $1 AND seq > $2 AND idempotency_key IS NOT NULL
	ORDER BY seq LIMIT $3`

// ScanKeys yields the digest and seq of each of the chain's keyed entries.
// Here the index is a column of the entry's row, kept unique by the
// server's index on (chain_id, idempotency_key), so the records are the
// keyed rows themselves; the keys are digested in Go, as storage.KeyDigest
// defines. The transaction's buffered appends are sent first, as for
// Entries, so a writable transaction sees its own.
func (t *tx) ScanKeys(ctx context.Context, chain string) iter.Seq2[storage.KeyRef, error] {
	return func(yield func(storage.KeyRef, error) bool) {
		err := t.scanKeyPages(ctx, chain, KeyScanPageSize, func(seqs []uint64, keys []string) bool {
			for i, key := range keys {
				if !yield(storage.KeyRef{Digest: storage.KeyDigest(key), Seq: seqs[i]}, nil) {
					return false
				}
			}
			return true
		})
		if err != nil {
			yield(storage.KeyRef{}, err)
		}
	}
}
