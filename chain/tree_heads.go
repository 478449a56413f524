package chain

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/ledgerworks/ledger/merkle"
	"github.com/ledgerworks/ledger/storage"
)

// A ledger checkpoint commits to every chain's tree head at one moment
// (package checkpoint). The ledger keeps the heads a checkpoint was made
// of, under the checkpoint's root, so that proofs against it can be made
// later:
//
//	0x00 treeheads/v1/<root, 32 bytes>   the heads, in chain order
//
// each head as lp(chain) || u64be(size) || root.
const treeHeadsPrefix = "\x00treeheads/v1/"

// TreeHeadsChainsMax bounds the chains one set of recorded tree heads
// holds, and so the size of its value (about 100 bytes per chain).
const TreeHeadsChainsMax = 1 << 20

func treeHeadsKey(id merkle.Hash) []byte { return append([]byte(treeHeadsPrefix), id[:]...) }

// TreeHeads returns every chain's tree head, in chain order, from one
// snapshot. ErrTreeBehind when a chain's tree does not cover it.
func (db *DB) TreeHeads(ctx context.Context) ([]TreeHead, error) {
	var heads []TreeHead
	err := db.View(ctx, func(tx *Tx) error {
		// The heads first, then the trees: a store may not serve a read
		// while it streams.
		var chains []Head
		for h, err := range tx.Chains("") {
			if err != nil {
				return err
			}
			if len(chains) == TreeHeadsChainsMax {
				return fmt.Errorf("chain: more than %d chains for one set of tree heads", TreeHeadsChainsMax)
			}
			chains = append(chains, h)
		}
		heads = make([]TreeHead, 0, len(chains))
		for _, h := range chains {
			r, err := currentRange(ctx, tx.stx, h.Chain, h.Seq)
			if err != nil {
				return tx.failed(err)
			}
			heads = append(heads, TreeHead{Chain: h.Chain, Size: r.Size, Root: r.Root()})
		}
		return nil
	})
	return heads, err
}

// RecordTreeHeads keeps heads (in chain order) under id, the root of the
// checkpoint made of them, for RecordedTreeHeads.
func (db *DB) RecordTreeHeads(ctx context.Context, id merkle.Hash, heads []TreeHead) error {
	if len(heads) > TreeHeadsChainsMax {
		return fmt.Errorf("chain: %d tree heads, more than %d", len(heads), TreeHeadsChainsMax)
	}
	value := make([]byte, 0, len(heads)*(4+16+8+merkle.HashSize))
	for i, h := range heads {
		if i > 0 && heads[i-1].Chain >= h.Chain {
			return fmt.Errorf("chain: tree heads not in strict chain order at %q", h.Chain)
		}
		value = appendLengthPrefixed(value, []byte(h.Chain))
		value = binary.BigEndian.AppendUint64(value, h.Size)
		value = append(value, h.Root[:]...)
	}
	return db.Update(ctx, func(tx *Tx) error {
		tx.dirty = true
		return tx.failed(tx.stx.StatePut(tx.ctx, treeHeadsKey(id), value))
	})
}

// RecordedTreeHeads returns the heads recorded under id; ErrNotFound when
// none are.
func (tx *Tx) RecordedTreeHeads(id merkle.Hash) ([]TreeHead, error) {
	v, err := tx.stx.StateGet(tx.ctx, treeHeadsKey(id))
	if errors.Is(err, storage.ErrNotFound) {
		return nil, fmt.Errorf("no tree heads recorded for checkpoint root %x: %w", id, ErrNotFound)
	}
	if err != nil {
		return nil, tx.failed(err)
	}
	var heads []TreeHead
	for len(v) > 0 {
		if len(v) < 4 {
			return nil, fmt.Errorf("%w: recorded tree heads truncated", ErrCorrupt)
		}
		n := binary.BigEndian.Uint32(v)
		if uint64(len(v)) < 4+uint64(n)+8+merkle.HashSize {
			return nil, fmt.Errorf("%w: recorded tree heads truncated", ErrCorrupt)
		}
		h := TreeHead{Chain: string(v[4 : 4+n]), Size: binary.BigEndian.Uint64(v[4+n:]), Root: merkle.Hash(v[12+n : 12+n+merkle.HashSize])}
		heads = append(heads, h)
		v = v[12+n+merkle.HashSize:]
	}
	return heads, nil
}
