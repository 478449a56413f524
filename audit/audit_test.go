package audit_test

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ledgerworks/ledger/audit"
	"github.com/ledgerworks/ledger/chain"
	"github.com/ledgerworks/ledger/chain/chaintest"
	"github.com/ledgerworks/ledger/checkpoint"
	"github.com/ledgerworks/ledger/merkle"
	"github.com/transparency-dev/merkle/proof"
	"github.com/transparency-dev/merkle/rfc6962"
	"golang.org/x/mod/sumdb/note"
)

var update = flag.Bool("update", false, "rewrite the test vectors under testdata/proofs")

// The test key: fixed, so that the vectors are reproducible. Never use it
// for anything else.
const (
	testOrigin   = "ledger.example/test"
	testSigner   = "PRIVATE+KEY+ledger.example/test+7de2d9c7+AQI32igpZ0Pda3nq4aEyBE1ffJEBLtG78rGxfQKLQfm/"
	testVerifier = "ledger.example/test+7de2d9c7+AdNBqOqGdBZvNtzg1w2iCvgedk9ZVK192hRGwyoGr8oe"
)

const vectorsDir = "../testdata/proofs"

// fixture is a ledger with two checkpoints: old after 300 entries on two
// chains, new after 400 more and a third chain that sorts first.
type fixture struct {
	db       *chain.DB
	old, new []byte
}

func newFixture(t *testing.T, db *chain.DB) fixture {
	t.Helper()
	ctx := context.Background()
	appendN := func(chains []string, n int) {
		for i := range n {
			c := chains[i%len(chains)]
			if _, err := db.Append(ctx, chain.Request{Chain: c, IdempotencyKey: fmt.Sprintf("k%d-%d", len(chains), i), Type: "audit.test/v1", Payload: []byte(fmt.Sprintf("entry %d", i))}); err != nil {
				t.Fatal(err)
			}
		}
	}
	appendN([]string{"acme/books", "acme/stock"}, 300)
	old, _, err := audit.CreateCheckpoint(ctx, db, testSigner)
	if err != nil {
		t.Fatal(err)
	}
	appendN([]string{"acme/books", "acme/stock", "acme/a-first"}, 400)
	newer, _, err := audit.CreateCheckpoint(ctx, db, testSigner)
	if err != nil {
		t.Fatal(err)
	}
	return fixture{db: db, old: old, new: newer}
}

func clock() func() time.Time {
	return chaintest.SteppingClock(time.Unix(1_764_000_000, 0).UTC(), time.Millisecond)
}

func TestKeysMatch(t *testing.T) {
	signer, err := note.NewSigner(testSigner)
	if err != nil {
		t.Fatal(err)
	}
	verifier, err := note.NewVerifier(testVerifier)
	if err != nil || verifier.KeyHash() != signer.KeyHash() || signer.Name() != testOrigin {
		t.Fatalf("test keys do not match: %v", err)
	}
}

func TestProofsVerify(t *testing.T) {
	chaintest.ForEachBackend(t, func() chain.Options { return chain.Options{Clock: clock()} }, func(t *testing.T, db *chain.DB) {
		f := newFixture(t, db)
		ctx := context.Background()
		for _, c := range []struct {
			chain string
			seq   uint64
		}{{"acme/books", 1}, {"acme/books", 150}, {"acme/stock", 150}, {"acme/a-first", 133}, {"acme/stock", 283}} {
			p, err := audit.ProveEntry(ctx, db, f.new, testVerifier, c.chain, c.seq)
			if err != nil {
				t.Fatal(err)
			}
			b, err := p.Marshal()
			if err != nil {
				t.Fatal(err)
			}
			parsed, err := audit.ParseEntryProof(b)
			if err != nil {
				t.Fatal(err)
			}
			cp, e, err := audit.VerifyEntryProof(parsed, testVerifier)
			if err != nil || e.Chain != c.chain || e.Seq != c.seq || cp.Size != 3 {
				t.Fatalf("%s %d: %v (%s %d, %d chains)", c.chain, c.seq, err, e.Chain, e.Seq, cp.Size)
			}
			independentEntryCheck(t, parsed, cp)
		}
		if _, err := audit.ProveEntry(ctx, db, f.old, testVerifier, "acme/a-first", 1); !errors.Is(err, chain.ErrNotFound) {
			t.Fatalf("entry of a chain after the checkpoint: %v", err)
		}
		if _, err := audit.ProveEntry(ctx, db, f.old, testVerifier, "acme/books", 151); !errors.Is(err, chain.ErrNotFound) {
			t.Fatalf("entry after the checkpoint: %v", err)
		}
		p, err := audit.ProveConsistency(ctx, db, f.old, f.new, testVerifier)
		if err != nil {
			t.Fatal(err)
		}
		old, newer, err := audit.VerifyConsistencyProof(p, testVerifier)
		if err != nil || old.Size != 2 || newer.Size != 3 {
			t.Fatalf("consistency: %v", err)
		}
		for _, c := range p.Chains {
			if err := proof.VerifyConsistency(rfc6962.DefaultHasher, c.OldSize, c.NewSize, rawPath(c.Consistency), c.OldRoot[:], c.NewRoot[:]); err != nil {
				t.Fatalf("transparency-dev consistency of %s: %v", c.Chain, err)
			}
		}
		if _, err := audit.ProveConsistency(ctx, db, f.new, f.old, testVerifier); !errors.Is(err, audit.ErrChainMissing) {
			t.Fatalf("consistency backwards: %v", err)
		}
		// The ledger extends both checkpoints.
		for _, signed := range [][]byte{f.old, f.new} {
			trees, _, err := audit.CheckpointTrees(ctx, db, signed, testVerifier)
			if err != nil {
				t.Fatal(err)
			}
			r, err := db.Verify(ctx, chain.VerifyOptions{ExpectTrees: trees})
			if err != nil || !r.OK() {
				t.Fatalf("verify against a checkpoint: %v %+v", err, r.Failures)
			}
		}
	})
}

// independentEntryCheck checks an entry proof with transparency-dev/merkle
// and this test's own reading of docs/FORMAT.md, not package audit.
func independentEntryCheck(t *testing.T, p *audit.EntryProof, cp checkpoint.Checkpoint) {
	t.Helper()
	line := p.Entry
	hash, err := decodeHex(line.Hash)
	if err != nil {
		t.Fatal(err)
	}
	leaf := rfc6962.DefaultHasher.HashLeaf(hash)
	if err := proof.VerifyInclusion(rfc6962.DefaultHasher, line.Seq-1, p.ChainSize, leaf, rawPath(p.Inclusion), p.ChainRoot[:]); err != nil {
		t.Fatalf("transparency-dev entry inclusion: %v", err)
	}
	data := append([]byte("ledger/checkpoint/v1\x00"), byte(len(line.Chain)>>24), byte(len(line.Chain)>>16), byte(len(line.Chain)>>8), byte(len(line.Chain)))
	data = append(data, line.Chain...)
	for i := 7; i >= 0; i-- {
		data = append(data, byte(p.ChainSize>>(8*i)))
	}
	data = append(data, p.ChainRoot[:]...)
	if err := proof.VerifyInclusion(rfc6962.DefaultHasher, p.ChainIndex, cp.Size, rfc6962.DefaultHasher.HashLeaf(data), rawPath(p.ChainInclusion), cp.Root[:]); err != nil {
		t.Fatalf("transparency-dev chain inclusion: %v", err)
	}
}

func decodeHex(s string) ([]byte, error) {
	var h audit.HexHash
	err := h.UnmarshalText([]byte(s))
	return h[:], err
}

func rawPath(p []audit.HexHash) [][]byte {
	out := make([][]byte, len(p))
	for i := range p {
		out[i] = p[i][:]
	}
	return out
}

// vector is one file under testdata/proofs/<feature>/.
type vector struct {
	Description string          `json:"description"`
	VerifierKey string          `json:"verifier_key"`
	Proof       json.RawMessage `json:"proof"`
	// Error names the refusal, empty when the proof holds.
	Error string `json:"error"`
}

// refusal names an error of Verify*, as the vectors do.
func refusal(err error) string {
	var origin *checkpoint.OriginMismatchError
	var pe *audit.ProofError
	part := ""
	if errors.As(err, &pe) {
		part = strings.ReplaceAll(pe.Part, " ", "_") + ": "
	}
	switch {
	case err == nil:
		return ""
	case errors.As(err, &origin):
		return part + "origin_mismatch"
	case errors.Is(err, checkpoint.ErrSignature):
		return part + "bad_signature"
	case errors.Is(err, checkpoint.ErrMalformed):
		return part + "malformed_checkpoint"
	case errors.Is(err, audit.ErrEntryHashMismatch):
		return "entry_hash_mismatch"
	case errors.Is(err, audit.ErrSmallerSize):
		return part + "smaller_size"
	case errors.Is(err, audit.ErrChainMissing):
		return "chain_missing"
	case errors.Is(err, merkle.ErrRootMismatch):
		return part + "root_mismatch"
	case errors.Is(err, merkle.ErrProofLength):
		return part + "proof_length"
	case errors.Is(err, audit.ErrMalformed):
		return "malformed"
	}
	return "other: " + err.Error()
}

// TestVectors checks every vector; with -update it first writes them from
// a fresh fixture and its tampered variants.
func TestVectors(t *testing.T) {
	if *update {
		writeVectors(t)
	}
	files, err := filepath.Glob(filepath.Join(vectorsDir, "*", "*.json"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no vectors: %v", err)
	}
	for _, file := range files {
		feature := filepath.Base(filepath.Dir(file))
		if feature != "entry" && feature != "consistency" {
			continue
		}
		t.Run(feature+"/"+filepath.Base(file), func(t *testing.T) {
			b, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			var v vector
			if err := json.Unmarshal(b, &v); err != nil {
				t.Fatal(err)
			}
			var verr error
			if feature == "entry" {
				p, err := audit.ParseEntryProof(v.Proof)
				if verr = err; err == nil {
					_, _, verr = audit.VerifyEntryProof(p, v.VerifierKey)
				}
			} else {
				p, err := audit.ParseConsistencyProof(v.Proof)
				if verr = err; err == nil {
					_, _, verr = audit.VerifyConsistencyProof(p, v.VerifierKey)
				}
			}
			if got := refusal(verr); got != v.Error {
				t.Fatalf("%s: refusal %q, want %q (%v)", v.Description, got, v.Error, verr)
			}
		})
	}
}

func writeVectors(t *testing.T) {
	ctx := context.Background()
	db, err := chain.Open(filepath.Join(t.TempDir(), "ledger.db"), chain.Options{Clock: clock()})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	f := newFixture(t, db)
	entry, err := audit.ProveEntry(ctx, db, f.new, testVerifier, "acme/stock", 150)
	if err != nil {
		t.Fatal(err)
	}
	cons, err := audit.ProveConsistency(ctx, db, f.old, f.new, testVerifier)
	if err != nil {
		t.Fatal(err)
	}
	otherSigner, otherVerifier, err := note.GenerateKey(zeroReader{}, "ledger.example/other")
	if err != nil {
		t.Fatal(err)
	}
	// A checkpoint of the right text signed by a key of another name.
	cp, _ := checkpoint.Body(f.new)
	forged := forgeOrigin(t, cp, otherSigner)
	write := func(feature, name, description, verifierKey string, p any, want string) {
		b, err := json.Marshal(p)
		if err != nil {
			t.Fatal(err)
		}
		v := vector{Description: description, VerifierKey: verifierKey, Proof: b, Error: want}
		out, err := json.MarshalIndent(v, "", "  ")
		if err != nil {
			t.Fatal(err)
		}
		dir := filepath.Join(vectorsDir, feature)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name+".json"), append(out, '\n'), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	e := func(change func(p *audit.EntryProof)) *audit.EntryProof {
		c := *entry
		c.Inclusion = append([]audit.HexHash(nil), entry.Inclusion...)
		c.ChainInclusion = append([]audit.HexHash(nil), entry.ChainInclusion...)
		change(&c)
		return &c
	}
	write("entry", "valid", "acme/stock seq 150 in a checkpoint of three chains", testVerifier, entry, "")
	write("entry", "tampered-inclusion-hash", "one hash of the entry's audit path changed", testVerifier,
		e(func(p *audit.EntryProof) { p.Inclusion[2][0] ^= 1 }), "entry_inclusion: root_mismatch")
	write("entry", "inclusion-hash-dropped", "the entry's audit path one hash short", testVerifier,
		e(func(p *audit.EntryProof) { p.Inclusion = p.Inclusion[1:] }), "entry_inclusion: proof_length")
	write("entry", "changed-chain-root", "the chain's root changed: the entry's path no longer leads to it", testVerifier,
		e(func(p *audit.EntryProof) { p.ChainRoot[5] ^= 0x10 }), "entry_inclusion: root_mismatch")
	write("entry", "tampered-chain-inclusion-hash", "one hash of the chain's path in the checkpoint changed", testVerifier,
		e(func(p *audit.EntryProof) { p.ChainInclusion[0][31] ^= 0x80 }), "chain_inclusion: root_mismatch")
	write("entry", "smaller-chain-size", "the chain's size in the checkpoint understated", testVerifier,
		e(func(p *audit.EntryProof) { p.ChainSize = 200 }), "entry_inclusion: proof_length")
	write("entry", "changed-payload", "the entry's payload changed, its hash kept", testVerifier,
		e(func(p *audit.EntryProof) { p.Entry.Payload = "ZW50cnkgOTk5" }), "entry_hash_mismatch")
	write("entry", "bad-signature", "the checkpoint's signature changed", testVerifier,
		e(func(p *audit.EntryProof) { p.Checkpoint = flipSignature(p.Checkpoint) }), "bad_signature")
	write("entry", "changed-checkpoint-root", "the checkpoint's root line changed, its signature kept", testVerifier,
		e(func(p *audit.EntryProof) { p.Checkpoint = changeRoot(t, p.Checkpoint) }), "bad_signature")
	write("entry", "unknown-key", "checked with another key", otherVerifier, entry, "bad_signature")
	write("entry", "wrong-origin", "a checkpoint signed by a key whose name is not its origin", otherVerifier,
		e(func(p *audit.EntryProof) { p.Checkpoint = forged }), "origin_mismatch")
	write("consistency", "valid", "two chains of 150 entries each extended, a third chain added", testVerifier, cons, "")
	cs := func(change func(p *audit.ConsistencyProof)) *audit.ConsistencyProof {
		var c audit.ConsistencyProof
		b, _ := json.Marshal(cons)
		json.Unmarshal(b, &c)
		change(&c)
		return &c
	}
	write("consistency", "swapped-checkpoints", "old and new swapped: the newer holds fewer chains", testVerifier,
		cs(func(p *audit.ConsistencyProof) { p.Old, p.New = p.New, p.Old }), "smaller_size")
	write("consistency", "tampered-consistency-hash", "one hash of a chain's consistency proof changed", testVerifier,
		cs(func(p *audit.ConsistencyProof) { p.Chains[1].Consistency[0][0] ^= 1 }), "consistency: root_mismatch")
	write("consistency", "smaller-chain-size", "a chain's new size below its old size", testVerifier,
		cs(func(p *audit.ConsistencyProof) { p.Chains[0].NewSize = p.Chains[0].OldSize - 1 }), "new_chain_inclusion: root_mismatch")
	write("consistency", "chain-left-out", "one chain of the old checkpoint not shown", testVerifier,
		cs(func(p *audit.ConsistencyProof) { p.Chains = p.Chains[:1] }), "chain_missing")
	write("consistency", "changed-old-root", "a chain's old root changed", testVerifier,
		cs(func(p *audit.ConsistencyProof) { p.Chains[0].OldRoot[0] ^= 1 }), "old_chain_inclusion: root_mismatch")
	write("consistency", "bad-signature", "the new checkpoint's signature changed", testVerifier,
		cs(func(p *audit.ConsistencyProof) { p.New = flipSignature(p.New) }), "new_checkpoint: bad_signature")
	write("consistency", "wrong-origin", "the old checkpoint signed by a key whose name is not its origin", otherVerifier,
		cs(func(p *audit.ConsistencyProof) { p.Old = forged }), "old_checkpoint: origin_mismatch")
	_ = otherSigner
}

// forgeOrigin signs cp's text with a key of another name.
func forgeOrigin(t *testing.T, cp checkpoint.Checkpoint, signerKey string) string {
	signer, err := note.NewSigner(signerKey)
	if err != nil {
		t.Fatal(err)
	}
	b, err := note.Sign(&note.Note{Text: string(cp.Marshal())}, signer)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// flipSignature changes one base64 digit of the note's signature.
func flipSignature(signed string) string {
	i := strings.LastIndex(signed, " ") + 10
	c := byte('A')
	if signed[i] == 'A' {
		c = 'B'
	}
	return signed[:i] + string(c) + signed[i+1:]
}

// changeRoot changes the root line of a signed checkpoint.
func changeRoot(t *testing.T, signed string) string {
	lines := strings.SplitN(signed, "\n", 4)
	cp, err := checkpoint.Body([]byte(signed))
	if err != nil {
		t.Fatal(err)
	}
	cp.Root[0] ^= 1
	text := string(cp.Marshal())
	return text + lines[3]
}

// zeroReader makes note.GenerateKey deterministic for the vectors.
type zeroReader struct{}

func (zeroReader) Read(p []byte) (int, error) { clear(p); return len(p), nil }

func TestLedgerTruncatedBelowACheckpoint(t *testing.T) {
	chaintest.ForEachBackend(t, func() chain.Options { return chain.Options{Clock: clock()} }, func(t *testing.T, db *chain.DB) {
		f := newFixture(t, db)
		ctx := context.Background()
		trees, _, err := audit.CheckpointTrees(ctx, db, f.new, testVerifier)
		if err != nil {
			t.Fatal(err)
		}
		// The checkpoint as the ledger would have to be after a truncation:
		// every chain shorter by one than the checkpoint says.
		for i := range trees {
			trees[i].Size++
		}
		r, err := db.Verify(ctx, chain.VerifyOptions{ExpectTrees: trees})
		if err != nil {
			t.Fatal(err)
		}
		if len(r.Failures) != 3 {
			t.Fatalf("failures %+v", r.Failures)
		}
		for _, f := range r.Failures {
			if f.Reason != chain.ReasonTruncated {
				t.Fatalf("failure %v", f)
			}
		}
		if _, _, err := audit.CheckpointTrees(ctx, db, []byte(flipSignature(string(f.new))), testVerifier); !errors.Is(err, checkpoint.ErrSignature) {
			t.Fatalf("bad signature: %v", err)
		}
	})
}
