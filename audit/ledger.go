package audit

import (
	"context"
	"errors"
	"fmt"

	"github.com/ledgerworks/ledger/chain"
	"github.com/ledgerworks/ledger/checkpoint"
)

// CreateCheckpoint signs a checkpoint of every chain's tree head, read
// from one snapshot, and records the heads in the ledger under its root
// (so that proofs against it can be made later). The origin is the
// signing key's name.
func CreateCheckpoint(ctx context.Context, db *chain.DB, signerKey string) ([]byte, checkpoint.Checkpoint, error) {
	heads, err := db.TreeHeads(ctx)
	if err != nil {
		return nil, checkpoint.Checkpoint{}, err
	}
	tree, err := checkpoint.NewTree(leaves(heads))
	if err != nil {
		return nil, checkpoint.Checkpoint{}, err
	}
	origin, err := signerName(signerKey)
	if err != nil {
		return nil, checkpoint.Checkpoint{}, err
	}
	cp := checkpoint.Checkpoint{Origin: origin, Size: uint64(len(heads)), Root: tree.Root()}
	signed, err := checkpoint.Sign(cp, signerKey)
	if err != nil {
		return nil, cp, err
	}
	// The heads of an unchanged ledger are recorded already: the root
	// names them.
	if _, err := recorded(ctx, db, cp); errors.Is(err, ErrCheckpointUnknown) {
		err = db.RecordTreeHeads(ctx, cp.Root, heads)
		if err != nil {
			return nil, cp, err
		}
	} else if err != nil {
		return nil, cp, err
	}
	return signed, cp, nil
}

// signerName returns the name of a signing key.
func signerName(signerKey string) (string, error) {
	return checkpoint.CheckSignerKey(signerKey)
}

func leaves(heads []chain.TreeHead) []checkpoint.Leaf {
	out := make([]checkpoint.Leaf, len(heads))
	for i, h := range heads {
		out[i] = checkpoint.Leaf{Chain: h.Chain, Size: h.Size, Root: h.Root}
	}
	return out
}

// openCheckpoint opens a signed checkpoint with the verifier key, or, when
// the key is empty, only parses it: a prover names a checkpoint, the
// auditor checks its signature.
func openCheckpoint(signed []byte, verifierKey string) (checkpoint.Checkpoint, error) {
	if verifierKey == "" {
		return checkpoint.Body(signed)
	}
	return checkpoint.Open(signed, verifierKey)
}

// recorded returns the tree of the heads the ledger recorded for cp,
// checked against cp's root and size.
func recorded(ctx context.Context, db *chain.DB, cp checkpoint.Checkpoint) (*checkpoint.Tree, error) {
	var heads []chain.TreeHead
	err := db.View(ctx, func(tx *chain.Tx) error {
		var err error
		heads, err = tx.RecordedTreeHeads(cp.Root)
		return err
	})
	if errors.Is(err, chain.ErrNotFound) {
		return nil, fmt.Errorf("%w: root %x", ErrCheckpointUnknown, cp.Root)
	}
	if err != nil {
		return nil, err
	}
	tree, err := checkpoint.NewTree(leaves(heads))
	if err != nil {
		return nil, fmt.Errorf("%w: recorded tree heads: %w", chain.ErrCorrupt, err)
	}
	if root := tree.Root(); root != cp.Root || uint64(len(heads)) != cp.Size {
		return nil, fmt.Errorf("%w: recorded tree heads make %d chains with root %x, the checkpoint %d with %x",
			chain.ErrCorrupt, len(heads), root, cp.Size, cp.Root)
	}
	return tree, nil
}

// ProveEntry returns the proof that the entry at (chainID, seq) is in the
// signed checkpoint, which must have been made from this ledger. The
// checkpoint's signature is checked when verifierKey is not empty.
func ProveEntry(ctx context.Context, db *chain.DB, signed []byte, verifierKey, chainID string, seq uint64) (*EntryProof, error) {
	cp, err := openCheckpoint(signed, verifierKey)
	if err != nil {
		return nil, err
	}
	tree, err := recorded(ctx, db, cp)
	if err != nil {
		return nil, err
	}
	index, ok := tree.Index(chainID)
	if !ok {
		return nil, fmt.Errorf("chain %q is not in the checkpoint: %w", chainID, chain.ErrNotFound)
	}
	leaf := tree.Leaves[index]
	if seq == 0 || seq > leaf.Size {
		return nil, fmt.Errorf("chain %q seq %d is not in the checkpoint, which holds %d entries of it: %w", chainID, seq, leaf.Size, chain.ErrNotFound)
	}
	chainPath, err := tree.InclusionProof(index)
	if err != nil {
		return nil, err
	}
	p := &EntryProof{Format: EntryProofFormat, Checkpoint: string(signed), ChainSize: leaf.Size,
		ChainRoot: HexHash(leaf.Root), ChainIndex: index, ChainInclusion: hashes(chainPath)}
	err = db.View(ctx, func(tx *chain.Tx) error {
		e, err := tx.Get(chainID, seq)
		if err != nil {
			return err
		}
		if p.Entry, err = encodeEntry(&e); err != nil {
			return err
		}
		inclusion, err := tx.InclusionProof(chainID, seq, leaf.Size)
		p.Inclusion = hashes(inclusion)
		return err
	})
	if err != nil {
		return nil, err
	}
	return p, nil
}

// ProveConsistency returns the proof that the signed checkpoint newSigned
// extends oldSigned, both made from this ledger; their signatures are
// checked when verifierKey is not empty.
func ProveConsistency(ctx context.Context, db *chain.DB, oldSigned, newSigned []byte, verifierKey string) (*ConsistencyProof, error) {
	old, err := openCheckpoint(oldSigned, verifierKey)
	if err != nil {
		return nil, err
	}
	newer, err := openCheckpoint(newSigned, verifierKey)
	if err != nil {
		return nil, err
	}
	oldTree, err := recorded(ctx, db, old)
	if err != nil {
		return nil, err
	}
	newTree, err := recorded(ctx, db, newer)
	if err != nil {
		return nil, err
	}
	p := &ConsistencyProof{Format: ConsistencyProofFormat, Old: string(oldSigned), New: string(newSigned),
		Chains: make([]ChainExtension, 0, len(oldTree.Leaves))}
	err = db.View(ctx, func(tx *chain.Tx) error {
		for i, ol := range oldTree.Leaves {
			ni, ok := newTree.Index(ol.Chain)
			if !ok {
				return fmt.Errorf("%w: chain %q is not in the new checkpoint", ErrChainMissing, ol.Chain)
			}
			nl := newTree.Leaves[ni]
			if nl.Size < ol.Size {
				return &SmallerSizeError{Chain: ol.Chain, Expected: ol.Size, Got: nl.Size}
			}
			ext, err := extension(tx, oldTree, newTree, uint64(i), ni)
			if err != nil {
				return err
			}
			p.Chains = append(p.Chains, ext)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return p, nil
}

// extension proves one chain's leaf oi of the old tree extended by leaf ni
// of the new.
func extension(tx *chain.Tx, oldTree, newTree *checkpoint.Tree, oi, ni uint64) (ChainExtension, error) {
	ol, nl := oldTree.Leaves[oi], newTree.Leaves[ni]
	oldPath, err := oldTree.InclusionProof(oi)
	if err != nil {
		return ChainExtension{}, err
	}
	newPath, err := newTree.InclusionProof(ni)
	if err != nil {
		return ChainExtension{}, err
	}
	consistency, err := tx.ConsistencyProof(ol.Chain, ol.Size, nl.Size)
	if err != nil {
		return ChainExtension{}, err
	}
	return ChainExtension{Chain: ol.Chain,
		OldIndex: oi, OldSize: ol.Size, OldRoot: HexHash(ol.Root), OldInclusion: hashes(oldPath),
		NewIndex: ni, NewSize: nl.Size, NewRoot: HexHash(nl.Root), NewInclusion: hashes(newPath),
		Consistency: hashes(consistency)}, nil
}

// CheckpointTrees returns the tree heads a ledger must extend to extend
// the signed checkpoint, for chain.VerifyOptions.ExpectTrees: the heads
// the ledger recorded for it, checked against its signed root.
func CheckpointTrees(ctx context.Context, db *chain.DB, signed []byte, verifierKey string) ([]chain.TreeHead, checkpoint.Checkpoint, error) {
	cp, err := checkpoint.Open(signed, verifierKey)
	if err != nil {
		return nil, cp, err
	}
	tree, err := recorded(ctx, db, cp)
	if err != nil {
		return nil, cp, err
	}
	heads := make([]chain.TreeHead, len(tree.Leaves))
	for i, l := range tree.Leaves {
		heads[i] = chain.TreeHead{Chain: l.Chain, Size: l.Size, Root: l.Root}
	}
	return heads, cp, nil
}
