package checkpoint

import (
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/ledgerworks/ledger/merkle"
	"golang.org/x/mod/sumdb/note"
)

// Limits checked on entry.
const (
	// OriginLengthMax bounds the origin line.
	OriginLengthMax = 256
	// NoteSizeMax bounds a signed checkpoint's bytes.
	NoteSizeMax = 64 << 10
	// ChainLengthMax bounds a chain id in a leaf (the engine's limit is
	// lower).
	ChainLengthMax = 1024
)

// LeafDomain separates checkpoint leaves from every other hash input.
const LeafDomain = "ledger/checkpoint/v1\x00"

// Checkpoint is the body of a signed checkpoint.
type Checkpoint struct {
	Origin string      // the log's name, and the signing key's
	Size   uint64      // the number of chains
	Root   merkle.Hash // the root of the tree of chain leaves
}

// Leaf is one chain's tree head in a checkpoint.
type Leaf struct {
	Chain string
	Size  uint64
	Root  merkle.Hash
}

// Hash returns the leaf's hash in the checkpoint's tree.
func (l *Leaf) Hash() merkle.Hash {
	data := make([]byte, 0, len(LeafDomain)+4+len(l.Chain)+8+merkle.HashSize)
	data = append(data, LeafDomain...)
	data = binary.BigEndian.AppendUint32(data, uint32(len(l.Chain)))
	data = append(data, l.Chain...)
	data = binary.BigEndian.AppendUint64(data, l.Size)
	data = append(data, l.Root[:]...)
	return merkle.HashLeaf(data)
}

// ErrLeafOrder: leaves not in strict byte order of their chains.
var ErrLeafOrder = errors.New("checkpoint: leaves not in strict chain order")

// Tree is the checkpoint's tree over its leaves.
type Tree struct {
	Leaves []Leaf
	hashes []merkle.Hash
}

// NewTree checks the leaves' order and hashes them.
func NewTree(leaves []Leaf) (*Tree, error) {
	t := &Tree{Leaves: leaves, hashes: make([]merkle.Hash, len(leaves))}
	for i := range leaves {
		if len(leaves[i].Chain) > ChainLengthMax {
			return nil, fmt.Errorf("checkpoint: chain id of %d bytes", len(leaves[i].Chain))
		}
		if i > 0 && leaves[i-1].Chain >= leaves[i].Chain {
			return nil, fmt.Errorf("%w: %q after %q", ErrLeafOrder, leaves[i].Chain, leaves[i-1].Chain)
		}
		t.hashes[i] = leaves[i].Hash()
	}
	return t, nil
}

// Root returns the tree's root.
func (t *Tree) Root() merkle.Hash {
	var r merkle.Range
	for _, h := range t.hashes {
		r.Append(h, nil)
	}
	return r.Root()
}

// Index returns the position of the chain's leaf, or false.
func (t *Tree) Index(chain string) (uint64, bool) {
	lo, hi := 0, len(t.Leaves)
	for lo < hi {
		mid := (lo + hi) / 2
		if t.Leaves[mid].Chain < chain {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	return uint64(lo), lo < len(t.Leaves) && t.Leaves[lo].Chain == chain
}

// InclusionProof returns the audit path of leaf index.
func (t *Tree) InclusionProof(index uint64) ([]merkle.Hash, error) {
	return merkle.InclusionProof(index, uint64(len(t.hashes)), leafNodes(t.hashes))
}

// leafNodes reads nodes by hashing the leaves under them.
type leafNodes []merkle.Hash

func (l leafNodes) Node(level uint, index uint64) (merkle.Hash, error) {
	begin := index << level
	end := begin + 1<<level
	if end > uint64(len(l)) {
		return merkle.Hash{}, fmt.Errorf("checkpoint: node %d/%d past %d leaves", level, index, len(l))
	}
	var r merkle.Range
	for _, h := range l[begin:end] {
		r.Append(h, nil)
	}
	return r.Root(), nil
}

// Marshal returns the note text of c.
func (c *Checkpoint) Marshal() []byte {
	return fmt.Appendf(nil, "%s\n%d\n%s\n", c.Origin, c.Size, base64.StdEncoding.EncodeToString(c.Root[:]))
}

// ErrMalformed: text that is not a checkpoint.
var ErrMalformed = errors.New("checkpoint: malformed")

// Parse parses a checkpoint's note text (without signatures). Extension
// lines after the root are allowed and ignored, as C2SP says.
func Parse(text []byte) (Checkpoint, error) {
	if len(text) > NoteSizeMax {
		return Checkpoint{}, fmt.Errorf("%w: %d bytes", ErrMalformed, len(text))
	}
	s := string(text)
	if !strings.HasSuffix(s, "\n") {
		return Checkpoint{}, fmt.Errorf("%w: text does not end in a newline", ErrMalformed)
	}
	lines := strings.Split(strings.TrimSuffix(s, "\n"), "\n")
	if len(lines) < 3 {
		return Checkpoint{}, fmt.Errorf("%w: %d lines, want at least 3", ErrMalformed, len(lines))
	}
	origin := lines[0]
	if err := checkOrigin(origin); err != nil {
		return Checkpoint{}, err
	}
	size, err := strconv.ParseUint(lines[1], 10, 64)
	if err != nil || strconv.FormatUint(size, 10) != lines[1] {
		return Checkpoint{}, fmt.Errorf("%w: size line %q", ErrMalformed, lines[1])
	}
	root, err := base64.StdEncoding.Strict().DecodeString(lines[2])
	if err != nil || len(root) != merkle.HashSize {
		return Checkpoint{}, fmt.Errorf("%w: root line %q", ErrMalformed, lines[2])
	}
	for _, l := range lines[3:] {
		if l == "" {
			return Checkpoint{}, fmt.Errorf("%w: empty extension line", ErrMalformed)
		}
	}
	return Checkpoint{Origin: origin, Size: size, Root: merkle.Hash(root)}, nil
}

// checkOrigin refuses an origin no note can carry.
func checkOrigin(origin string) error {
	if origin == "" || len(origin) > OriginLengthMax || strings.ContainsAny(origin, "\n+ ") {
		return fmt.Errorf("%w: origin %q (1..%d bytes, no space, '+' or newline)", ErrMalformed, origin, OriginLengthMax)
	}
	for _, r := range origin {
		if r < 0x21 || r == 0x7f {
			return fmt.Errorf("%w: origin %q holds a control character", ErrMalformed, origin)
		}
	}
	return nil
}

// GenerateKey returns a new Ed25519 signing key and its verifier key, in
// the note package's text forms, named origin.
func GenerateKey(origin string) (signerKey, verifierKey string, err error) {
	if err := checkOrigin(origin); err != nil {
		return "", "", err
	}
	return note.GenerateKey(rand.Reader, origin)
}

// ErrKey is matched by a signing or verifier key that is not one in the
// note package's text form (a verifier key given to sign, a damaged file).
var ErrKey = errors.New("checkpoint: malformed key")

// CheckSignerKey reports whether signerKey is a signing key, and returns its
// name.
func CheckSignerKey(signerKey string) (name string, err error) {
	signer, err := note.NewSigner(strings.TrimSpace(signerKey))
	if err != nil {
		return "", fmt.Errorf("%w: signing key: %w", ErrKey, err)
	}
	return signer.Name(), nil
}

// CheckVerifierKey reports whether verifierKey is a verifier key, and
// returns its name.
func CheckVerifierKey(verifierKey string) (name string, err error) {
	verifier, err := note.NewVerifier(strings.TrimSpace(verifierKey))
	if err != nil {
		return "", fmt.Errorf("%w: verifier key: %w", ErrKey, err)
	}
	return verifier.Name(), nil
}

// Sign returns the signed note of c. The signer's name must be c's origin.
func Sign(c Checkpoint, signerKey string) ([]byte, error) {
	if err := checkOrigin(c.Origin); err != nil {
		return nil, err
	}
	signer, err := note.NewSigner(strings.TrimSpace(signerKey))
	if err != nil {
		return nil, fmt.Errorf("%w: signing key: %w", ErrKey, err)
	}
	if signer.Name() != c.Origin {
		return nil, &OriginMismatchError{Expected: c.Origin, Got: signer.Name()}
	}
	return note.Sign(&note.Note{Text: string(c.Marshal())}, signer)
}

// ErrSignature is matched by a note whose signature does not verify, or
// that no signature of the given key signs.
var ErrSignature = errors.New("checkpoint: signature not verified")

// OriginMismatchError is a checkpoint of another origin than expected.
type OriginMismatchError struct {
	Expected, Got string
}

func (e *OriginMismatchError) Error() string {
	return fmt.Sprintf("checkpoint: origin %q, expected %q", e.Got, e.Expected)
}

// Open verifies the signed note msg with verifierKey, checks that its
// origin is the key's name, and parses it.
func Open(msg []byte, verifierKey string) (Checkpoint, error) {
	if len(msg) > NoteSizeMax {
		return Checkpoint{}, fmt.Errorf("%w: %d bytes", ErrMalformed, len(msg))
	}
	verifier, err := note.NewVerifier(strings.TrimSpace(verifierKey))
	if err != nil {
		return Checkpoint{}, fmt.Errorf("%w: verifier key: %w", ErrKey, err)
	}
	n, err := note.Open(msg, note.VerifierList(verifier))
	if err != nil {
		var unverified *note.UnverifiedNoteError
		var invalid *note.InvalidSignatureError
		if errors.As(err, &unverified) || errors.As(err, &invalid) {
			return Checkpoint{}, fmt.Errorf("%w: %w", ErrSignature, err)
		}
		return Checkpoint{}, fmt.Errorf("%w: %w", ErrMalformed, err)
	}
	c, err := Parse([]byte(n.Text))
	if err != nil {
		return Checkpoint{}, err
	}
	if c.Origin != verifier.Name() {
		return Checkpoint{}, &OriginMismatchError{Expected: verifier.Name(), Got: c.Origin}
	}
	return c, nil
}

// Body returns the text of a signed note without verifying it, for a
// ledger that names a checkpoint by its root before a key is at hand.
func Body(msg []byte) (Checkpoint, error) {
	i := bytes.LastIndex(msg, []byte("\n\n"))
	if i < 0 {
		return Checkpoint{}, fmt.Errorf("%w: no signature block", ErrMalformed)
	}
	return Parse(msg[:i+1])
}
