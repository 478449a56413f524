package chain

import (
	"bytes"
	"cmp"
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"

	"github.com/ledgerworks/ledger/merkle"
	"github.com/ledgerworks/ledger/storage"
)

// Tree failure reasons, beside those of verify.go.
const (
	// ReasonTreeMismatch: the chain's stored Merkle tree (its compact
	// range or a stored node) is not the tree of its entries, or holds
	// more leaves than the chain has entries. Seq is the size at which it
	// differs.
	ReasonTreeMismatch Reason = "tree_mismatch"
	// ReasonTreeHeadMismatch: the tree of the chain's entries at a size a
	// checkpoint names has another root than the checkpoint's: the
	// entries up to there were rewritten. Seq is the size.
	ReasonTreeHeadMismatch Reason = "tree_head_mismatch"
	// ReasonTruncated: the chain has fewer entries than a checkpoint's
	// tree of it. Seq is the checkpoint's size.
	ReasonTruncated Reason = "truncated"
)

// treeCheck is the tree part of a chain's verify: the tree of the
// entries, computed from their stored hashes (whose correctness the
// entry checks establish), against the stored tree and the tree heads a
// caller expects.
type treeCheck struct {
	chain  string
	stored merkle.Range
	// storedOK is false when the stored range is unreadable (reported).
	storedOK bool
	r        merkle.Range
	want     []TreeHead // sorted by size, consumed from the front
	nodes    []treeNode // computed nodes to compare with the stored ones
	add      func(Failure)
}

// checkTree verifies the chain's tree in tx: see treeCheck.
// When entriesBroken, the stored tree is not compared (see verifyChain).
func (db *DB) checkTree(ctx context.Context, tx *Tx, chain string, want []TreeHead, entriesBroken bool, add func(Failure)) error {
	c := &treeCheck{chain: chain, add: add, want: slices.SortedFunc(slices.Values(want), func(a, b TreeHead) int { return cmp.Compare(a.Size, b.Size) })}
	err := readRange(ctx, tx.stx, chain, &c.stored)
	c.storedOK = err == nil && !entriesBroken
	if entriesBroken {
		err = nil
	}
	if errors.Is(err, ErrCorrupt) {
		add(Failure{Chain: chain, Reason: ReasonTreeMismatch, Detail: err.Error()})
	} else if err != nil {
		return tx.failed(err)
	}
	if (!c.storedOK || c.stored.Size == 0) && len(c.want) == 0 {
		return nil // no tree to check (written with NoTrees, or before trees)
	}
	c.atSize()
	for rec, err := range tx.stx.Entries(ctx, chain, 1) {
		if err != nil {
			return tx.failed(err)
		}
		if rec.Seq != c.r.Size+1 || len(rec.Data) < recordFieldsOffset {
			break // a gap or an undecodable entry: the entry checks report it, and the tree ends there
		}
		c.r.Append(merkle.HashLeaf(rec.Data[recordHashOffset:recordFieldsOffset]), c.visit)
		c.atSize()
	}
	if c.storedOK && c.stored.Size > c.r.Size {
		add(Failure{Chain: chain, Seq: c.stored.Size, Reason: ReasonTreeMismatch,
			Detail: fmt.Sprintf("stored tree has %d leaves, the chain %d entries", c.stored.Size, c.r.Size)})
	}
	for _, w := range c.want {
		add(Failure{Chain: chain, Seq: w.Size, Reason: ReasonTruncated,
			Detail: fmt.Sprintf("checkpoint holds %d entries, the chain %d", w.Size, c.r.Size), Expected: Hash(w.Root)})
	}
	return c.checkNodes(ctx, tx)
}

// visit keeps the stored-level nodes the entries make, to compare once
// the entries are read (a store may not serve a read while it streams).
func (c *treeCheck) visit(level uint, index uint64, h merkle.Hash) {
	if level >= TreeStoredLevel && c.storedOK && (index+1)<<level <= c.stored.Size {
		c.nodes = append(c.nodes, treeNode{level: level, index: index, hash: h})
	}
}

// atSize checks the tree of the entries read so far against the stored
// range and the expected heads of its size.
func (c *treeCheck) atSize() {
	size := c.r.Size
	if c.storedOK && size == c.stored.Size && !slices.Equal(c.r.Hashes, c.stored.Hashes) {
		c.add(Failure{Chain: c.chain, Seq: size, Reason: ReasonTreeMismatch,
			Detail: "stored compact range differs from the entries'", Expected: Hash(c.stored.Root()), Calculated: Hash(c.r.Root())})
	}
	for len(c.want) > 0 && c.want[0].Size == size {
		if root := c.r.Root(); root != c.want[0].Root {
			c.add(Failure{Chain: c.chain, Seq: size, Reason: ReasonTreeHeadMismatch,
				Detail:   fmt.Sprintf("tree of the first %d entries has root %s, the checkpoint %s", size, hex.EncodeToString(root[:]), hex.EncodeToString(c.want[0].Root[:])),
				Expected: Hash(c.want[0].Root), Calculated: Hash(root)})
		}
		c.want = c.want[1:]
	}
}

// checkNodes compares the stored nodes with the computed ones.
func (c *treeCheck) checkNodes(ctx context.Context, tx *Tx) error {
	for _, n := range c.nodes {
		v, err := tx.stx.StateGet(ctx, treeNodeKey(c.chain, n.level, n.index))
		if err != nil && !errors.Is(err, storage.ErrNotFound) {
			return tx.failed(err)
		}
		if !bytes.Equal(v, n.hash[:]) {
			detail := fmt.Sprintf("stored node %d/%d differs from the entries'", n.level, n.index)
			if err != nil {
				detail = fmt.Sprintf("stored node %d/%d missing", n.level, n.index)
			}
			c.add(Failure{Chain: c.chain, Seq: (n.index + 1) << n.level, Reason: ReasonTreeMismatch, Detail: detail, Calculated: Hash(n.hash)})
		}
	}
	return nil
}
