package chain

import (
	"errors"
	"fmt"

	"github.com/ledgerworks/ledger/merkle"
	"github.com/ledgerworks/ledger/storage"
)

// TreeHead returns the chain's tree at its head: its size (the head's seq)
// and root. A chain without entries has the empty tree. ErrTreeBehind when
// the tree does not cover the chain (see Options.NoTrees).
func (tx *Tx) TreeHead(chain string) (TreeHead, error) {
	head, err := tx.head(chain)
	if err != nil {
		return TreeHead{}, err
	}
	r, err := currentRange(tx.ctx, tx.stx, chain, head.Seq)
	if err != nil {
		return TreeHead{}, tx.failed(err)
	}
	return TreeHead{Chain: chain, Size: r.Size, Root: r.Root()}, nil
}

// TreeRoot returns the root of the chain's tree at an earlier size (at
// most the tree's).
func (tx *Tx) TreeRoot(chain string, size uint64) (merkle.Hash, error) {
	nodes, err := tx.treeNodes(chain, size)
	if err != nil {
		return merkle.Hash{}, err
	}
	root, err := merkle.RootAt(size, nodes)
	return root, tx.failed(err)
}

// InclusionProof returns the audit path of the entry at seq in the chain's
// tree of the given size: its leaf is index seq-1.
func (tx *Tx) InclusionProof(chain string, seq, size uint64) ([]merkle.Hash, error) {
	if seq == 0 || seq > size {
		return nil, fmt.Errorf("chain %q seq %d in a tree of size %d: %w", chain, seq, size, ErrNotFound)
	}
	nodes, err := tx.treeNodes(chain, size)
	if err != nil {
		return nil, err
	}
	p, err := merkle.InclusionProof(seq-1, size, nodes)
	return p, tx.failed(err)
}

// ConsistencyProof returns the proof that the chain's tree of size1 is a
// prefix of its tree of size2.
func (tx *Tx) ConsistencyProof(chain string, size1, size2 uint64) ([]merkle.Hash, error) {
	nodes, err := tx.treeNodes(chain, size2)
	if err != nil {
		return nil, err
	}
	p, err := merkle.ConsistencyProof(size1, size2, nodes)
	return p, tx.failed(err)
}

// treeNodes returns the reader of the chain's tree nodes for proofs within
// its first size leaves, after checking that the stored tree has them.
func (tx *Tx) treeNodes(chain string, size uint64) (*storedNodes, error) {
	head, err := tx.head(chain)
	if err != nil {
		return nil, err
	}
	if size > head.Seq {
		return nil, fmt.Errorf("chain %q has %d entries, not %d: %w", chain, head.Seq, size, ErrNotFound)
	}
	// A range within treeRangeLagMax of the head has every node stored.
	if _, err := currentRange(tx.ctx, tx.stx, chain, head.Seq); err != nil {
		return nil, tx.failed(err)
	}
	return &storedNodes{tx: tx, chain: chain, size: head.Seq}, nil
}

// storedNodes reads a chain's tree nodes: those at TreeStoredLevel and
// above from the state keyspace, the lower ones hashed from the leaves of
// their tile (its 256 entries' hashes, read once and kept).
type storedNodes struct {
	tx     *Tx
	chain  string
	size   uint64 // the stored tree's
	tile   uint64 // the index of the tile in leaves, when leaves is set
	leaves []merkle.Hash
}

func (s *storedNodes) Node(level uint, index uint64) (merkle.Hash, error) {
	if level >= TreeStoredLevel {
		v, err := s.tx.stx.StateGet(s.tx.ctx, treeNodeKey(s.chain, level, index))
		if errors.Is(err, storage.ErrNotFound) {
			return merkle.Hash{}, fmt.Errorf("%w: chain %q: tree node %d/%d missing", ErrCorrupt, s.chain, level, index)
		}
		if err != nil {
			return merkle.Hash{}, err
		}
		if len(v) != merkle.HashSize {
			return merkle.Hash{}, fmt.Errorf("%w: chain %q: tree node %d/%d of %d bytes", ErrCorrupt, s.chain, level, index, len(v))
		}
		return merkle.Hash(v), nil
	}
	begin := index << level
	tile := begin / treeTile
	if s.leaves == nil || s.tile != tile {
		if err := s.readTile(tile); err != nil {
			return merkle.Hash{}, err
		}
	}
	offset := begin - tile*treeTile
	end := offset + 1<<level
	if end > uint64(len(s.leaves)) {
		return merkle.Hash{}, fmt.Errorf("%w: chain %q: tree node %d/%d past its %d entries", ErrCorrupt, s.chain, level, index, s.size)
	}
	var r merkle.Range
	for i := offset; i < end; i++ {
		r.Append(s.leaves[i], nil)
	}
	return r.Root(), nil
}

// readTile reads the leaf hashes of one tile from the chain's entries.
func (s *storedNodes) readTile(tile uint64) error {
	s.leaves = s.leaves[:0]
	first := tile*treeTile + 1
	last := min(first+treeTile-1, s.size)
	for rec, err := range s.tx.stx.Entries(s.tx.ctx, s.chain, first) {
		if err != nil {
			return err
		}
		if rec.Seq > last {
			break
		}
		if rec.Seq != first+uint64(len(s.leaves)) || len(rec.Data) < recordFieldsOffset {
			return fmt.Errorf("%w: chain %q seq %d: entry not fit for its tree", ErrCorrupt, s.chain, rec.Seq)
		}
		s.leaves = append(s.leaves, merkle.HashLeaf(rec.Data[recordHashOffset:recordFieldsOffset]))
	}
	s.tile = tile
	return nil
}
