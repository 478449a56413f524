package audit

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"fmt"

	"github.com/ledgerworks/ledger/chain"
	"github.com/ledgerworks/ledger/checkpoint"
	"github.com/ledgerworks/ledger/merkle"
)

// Format names of the proof files.
const (
	EntryProofFormat       = "ledger-entry-proof/v1"
	ConsistencyProofFormat = "ledger-consistency-proof/v1"
)

// Limits checked on entry.
const (
	// ProofHashesMax bounds the hashes of one path (a tree of 2^64 leaves
	// needs 64).
	ProofHashesMax = 64
	// ProofFileSizeMax bounds a proof file.
	ProofFileSizeMax = 256 << 20
	// ConsistencyChainsMax bounds the chains of one consistency proof.
	ConsistencyChainsMax = chain.TreeHeadsChainsMax
)

// HexHash is a hash in 64 lowercase hex digits in JSON.
type HexHash merkle.Hash

// MarshalText implements encoding.TextMarshaler.
func (h HexHash) MarshalText() ([]byte, error) { return hex.AppendEncode(nil, h[:]), nil }

// UnmarshalText implements encoding.TextUnmarshaler: exactly 64 lowercase
// hex digits.
func (h *HexHash) UnmarshalText(b []byte) error {
	if len(b) != 2*merkle.HashSize || !bytes.Equal(bytes.ToLower(b), b) {
		return fmt.Errorf("%w: hash %q is not 64 lowercase hex digits", ErrMalformed, b)
	}
	if _, err := hex.Decode(h[:], b); err != nil {
		return fmt.Errorf("%w: hash %q: %v", ErrMalformed, b, err)
	}
	return nil
}

func hashes(p []merkle.Hash) []HexHash {
	out := make([]HexHash, len(p))
	for i := range p {
		out[i] = HexHash(p[i])
	}
	return out
}

func path(p []HexHash) ([]merkle.Hash, error) {
	if len(p) > ProofHashesMax {
		return nil, fmt.Errorf("%w: %d hashes in one path", ErrMalformed, len(p))
	}
	out := make([]merkle.Hash, len(p))
	for i := range p {
		out[i] = merkle.Hash(p[i])
	}
	return out, nil
}

// EntryProof shows one entry in a signed checkpoint: the entry, its
// inclusion in its chain's tree of ChainSize entries, and that tree head's
// inclusion in the checkpoint.
type EntryProof struct {
	Format     string `json:"format"`
	Checkpoint string `json:"checkpoint"` // the signed note
	// Entry is the entry with the fields of a Format v1 export line.
	Entry     chain.ExportLine `json:"entry"`
	ChainSize uint64           `json:"chain_size"`
	ChainRoot HexHash          `json:"chain_root"`
	// Inclusion is the audit path of leaf seq-1 in the chain's tree.
	Inclusion []HexHash `json:"inclusion"`
	// ChainIndex is the chain's leaf in the checkpoint's tree, and
	// ChainInclusion its audit path.
	ChainIndex     uint64    `json:"chain_index"`
	ChainInclusion []HexHash `json:"chain_inclusion"`
}

// ChainExtension shows one chain of an old checkpoint in a new one.
type ChainExtension struct {
	Chain        string    `json:"chain"`
	OldIndex     uint64    `json:"old_index"`
	OldSize      uint64    `json:"old_size"`
	OldRoot      HexHash   `json:"old_root"`
	OldInclusion []HexHash `json:"old_inclusion"`
	NewIndex     uint64    `json:"new_index"`
	NewSize      uint64    `json:"new_size"`
	NewRoot      HexHash   `json:"new_root"`
	NewInclusion []HexHash `json:"new_inclusion"`
	// Consistency proves the chain's tree of OldSize a prefix of its tree
	// of NewSize.
	Consistency []HexHash `json:"consistency"`
}

// ConsistencyProof shows that every chain of the old checkpoint is a
// prefix of the same chain in the new one. Chains lists every chain of the
// old checkpoint, in its order.
type ConsistencyProof struct {
	Format string           `json:"format"`
	Old    string           `json:"old"`
	New    string           `json:"new"`
	Chains []ChainExtension `json:"chains"`
}

// ParseEntryProof parses an entry proof file strictly: known fields only,
// the format named, nothing after the object.
func ParseEntryProof(b []byte) (*EntryProof, error) {
	var p EntryProof
	if err := parseStrict(b, &p); err != nil {
		return nil, err
	}
	if p.Format != EntryProofFormat {
		return nil, fmt.Errorf("%w: format %q, want %q", ErrMalformed, p.Format, EntryProofFormat)
	}
	return &p, nil
}

// ParseConsistencyProof parses a consistency proof file strictly.
func ParseConsistencyProof(b []byte) (*ConsistencyProof, error) {
	var p ConsistencyProof
	if err := parseStrict(b, &p); err != nil {
		return nil, err
	}
	if p.Format != ConsistencyProofFormat {
		return nil, fmt.Errorf("%w: format %q, want %q", ErrMalformed, p.Format, ConsistencyProofFormat)
	}
	if len(p.Chains) > ConsistencyChainsMax {
		return nil, fmt.Errorf("%w: %d chains", ErrMalformed, len(p.Chains))
	}
	return &p, nil
}

func parseStrict(b []byte, v any) error {
	if len(b) > ProofFileSizeMax {
		return fmt.Errorf("%w: %d bytes", ErrMalformed, len(b))
	}
	d := json.NewDecoder(bytes.NewReader(b))
	d.DisallowUnknownFields()
	if err := d.Decode(v); err != nil {
		return fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	if d.More() {
		return fmt.Errorf("%w: data after the proof", ErrMalformed)
	}
	return nil
}

// Marshal returns the proof file's bytes.
func (p *EntryProof) Marshal() ([]byte, error) { return marshal(p) }

// Marshal returns the proof file's bytes.
func (p *ConsistencyProof) Marshal() ([]byte, error) { return marshal(p) }

func marshal(v any) ([]byte, error) {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}

// VerifyEntryProof checks p with the checkpoint's verifier key, without a
// ledger, and returns the checkpoint and the entry it shows.
func VerifyEntryProof(p *EntryProof, verifierKey string) (checkpoint.Checkpoint, chain.Entry, error) {
	cp, err := checkpoint.Open([]byte(p.Checkpoint), verifierKey)
	if err != nil {
		return cp, chain.Entry{}, err
	}
	e, err := decodeEntry(&p.Entry)
	if err != nil {
		return cp, chain.Entry{}, fmt.Errorf("%w: entry: %v", ErrMalformed, err)
	}
	if calculated := e.ComputeHash(); calculated != e.Hash {
		return cp, e, &EntryHashMismatchError{Chain: e.Chain, Seq: e.Seq, Expected: e.Hash, Calculated: calculated}
	}
	if e.Seq == 0 || e.Seq > p.ChainSize {
		return cp, e, fmt.Errorf("%w: seq %d outside the chain's tree of %d entries", ErrMalformed, e.Seq, p.ChainSize)
	}
	inclusion, err := path(p.Inclusion)
	if err != nil {
		return cp, e, err
	}
	if err := merkle.VerifyInclusion(e.Seq-1, p.ChainSize, chain.LeafHash(e.Hash), inclusion, merkle.Hash(p.ChainRoot)); err != nil {
		return cp, e, &ProofError{Part: "entry inclusion", Err: err}
	}
	leaf := checkpoint.Leaf{Chain: e.Chain, Size: p.ChainSize, Root: merkle.Hash(p.ChainRoot)}
	chainInclusion, err := path(p.ChainInclusion)
	if err != nil {
		return cp, e, err
	}
	if err := merkle.VerifyInclusion(p.ChainIndex, cp.Size, leaf.Hash(), chainInclusion, cp.Root); err != nil {
		return cp, e, &ProofError{Part: "chain inclusion", Err: err}
	}
	return cp, e, nil
}

// VerifyConsistencyProof checks p with the checkpoints' verifier key,
// without a ledger, and returns both checkpoints.
func VerifyConsistencyProof(p *ConsistencyProof, verifierKey string) (old, new checkpoint.Checkpoint, err error) {
	if old, err = checkpoint.Open([]byte(p.Old), verifierKey); err != nil {
		return old, new, &ProofError{Part: "old checkpoint", Err: err}
	}
	if new, err = checkpoint.Open([]byte(p.New), verifierKey); err != nil {
		return old, new, &ProofError{Part: "new checkpoint", Err: err}
	}
	if old.Origin != new.Origin {
		return old, new, fmt.Errorf("%w: %q and %q", ErrOriginChanged, old.Origin, new.Origin)
	}
	if new.Size < old.Size {
		return old, new, &SmallerSizeError{Expected: old.Size, Got: new.Size}
	}
	if uint64(len(p.Chains)) != old.Size {
		return old, new, fmt.Errorf("%w: %d chains shown of the old checkpoint's %d", ErrChainMissing, len(p.Chains), old.Size)
	}
	for i := range p.Chains {
		c := &p.Chains[i]
		if err := verifyExtension(c, uint64(i), &old, &new, p.Chains); err != nil {
			return old, new, fmt.Errorf("chain %q: %w", c.Chain, err)
		}
	}
	return old, new, nil
}

// verifyExtension checks one chain of a consistency proof: the i-th leaf
// of the old checkpoint, carried into the new one at a later position than
// the chain before it, with its tree extended.
func verifyExtension(c *ChainExtension, i uint64, old, new *checkpoint.Checkpoint, all []ChainExtension) error {
	if c.OldIndex != i {
		return fmt.Errorf("%w: old index %d at position %d", ErrMalformed, c.OldIndex, i)
	}
	if i > 0 && all[i-1].NewIndex >= c.NewIndex {
		return fmt.Errorf("%w: new index %d not after %d", ErrMalformed, c.NewIndex, all[i-1].NewIndex)
	}
	oldLeaf := checkpoint.Leaf{Chain: c.Chain, Size: c.OldSize, Root: merkle.Hash(c.OldRoot)}
	oldPath, err := path(c.OldInclusion)
	if err != nil {
		return err
	}
	if err := merkle.VerifyInclusion(c.OldIndex, old.Size, oldLeaf.Hash(), oldPath, old.Root); err != nil {
		return &ProofError{Part: "old chain inclusion", Err: err}
	}
	newLeaf := checkpoint.Leaf{Chain: c.Chain, Size: c.NewSize, Root: merkle.Hash(c.NewRoot)}
	newPath, err := path(c.NewInclusion)
	if err != nil {
		return err
	}
	if err := merkle.VerifyInclusion(c.NewIndex, new.Size, newLeaf.Hash(), newPath, new.Root); err != nil {
		return &ProofError{Part: "new chain inclusion", Err: err}
	}
	if c.NewSize < c.OldSize {
		return &SmallerSizeError{Chain: c.Chain, Expected: c.OldSize, Got: c.NewSize}
	}
	consistency, err := path(c.Consistency)
	if err != nil {
		return err
	}
	if err := merkle.VerifyConsistency(c.OldSize, c.NewSize, consistency, merkle.Hash(c.OldRoot), merkle.Hash(c.NewRoot)); err != nil {
		return &ProofError{Part: "consistency", Err: err}
	}
	return nil
}

// decodeEntry decodes an entry of a proof as its export line, with the
// export's checks of every field.
func decodeEntry(l *chain.ExportLine) (chain.Entry, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(l); err != nil {
		return chain.Entry{}, err
	}
	return chain.DecodeExportLine(bytes.TrimSuffix(buf.Bytes(), []byte("\n")))
}

// encodeEntry returns e as the fields of its export line.
func encodeEntry(e *chain.Entry) (chain.ExportLine, error) {
	var l chain.ExportLine
	err := json.Unmarshal(chain.AppendExportLine(nil, e), &l)
	return l, err
}
