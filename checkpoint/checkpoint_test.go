package checkpoint_test

import (
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"os"
	"testing"

	"github.com/ledgerworks/ledger/checkpoint"
	"github.com/ledgerworks/ledger/merkle"
	"golang.org/x/mod/sumdb/note"
)

var update = flag.Bool("update", false, "rewrite testdata/proofs/checkpoint/tree.json")

const (
	testSigner   = "PRIVATE+KEY+ledger.example/test+7de2d9c7+AQI32igpZ0Pda3nq4aEyBE1ffJEBLtG78rGxfQKLQfm/"
	testVerifier = "ledger.example/test+7de2d9c7+AdNBqOqGdBZvNtzg1w2iCvgedk9ZVK192hRGwyoGr8oe"
	vectorFile   = "../testdata/proofs/checkpoint/tree.json"
)

// treeVector is the checkpoint tree of testdata/proofs/checkpoint: the
// leaves, each leaf's hash, the root and the note text.
type treeVector struct {
	Description string `json:"description"`
	Leaves      []struct {
		Chain    string `json:"chain"`
		Size     uint64 `json:"size"`
		Root     string `json:"root"`
		LeafHash string `json:"leaf_hash"`
	} `json:"leaves"`
	Origin   string `json:"origin"`
	Root     string `json:"root"`
	NoteText string `json:"note_text"`
}

func hash(s string) merkle.Hash {
	var h merkle.Hash
	b, _ := hex.DecodeString(s)
	copy(h[:], b)
	return h
}

func TestTreeVector(t *testing.T) {
	if *update {
		v := treeVector{Description: "three chains; the empty tree's root is SHA-256 of nothing", Origin: "ledger.example/test"}
		for _, c := range []struct {
			chain string
			size  uint64
			root  merkle.Hash
		}{{"acme/books", 2, merkle.HashChildren(ptr(merkle.HashLeaf([]byte("a"))), ptr(merkle.HashLeaf([]byte("b"))))},
			{"acme/empty", 0, merkle.HashEmpty}, {"acme/stock", 1, merkle.HashLeaf([]byte("c"))}} {
			l := checkpoint.Leaf{Chain: c.chain, Size: c.size, Root: c.root}
			h := l.Hash()
			v.Leaves = append(v.Leaves, struct {
				Chain    string `json:"chain"`
				Size     uint64 `json:"size"`
				Root     string `json:"root"`
				LeafHash string `json:"leaf_hash"`
			}{c.chain, c.size, hex.EncodeToString(c.root[:]), hex.EncodeToString(h[:])})
		}
		leaves := make([]checkpoint.Leaf, len(v.Leaves))
		for i, l := range v.Leaves {
			leaves[i] = checkpoint.Leaf{Chain: l.Chain, Size: l.Size, Root: hash(l.Root)}
		}
		tree, err := checkpoint.NewTree(leaves)
		if err != nil {
			t.Fatal(err)
		}
		root := tree.Root()
		v.Root = hex.EncodeToString(root[:])
		cp := checkpoint.Checkpoint{Origin: v.Origin, Size: 3, Root: root}
		v.NoteText = string(cp.Marshal())
		b, _ := json.MarshalIndent(v, "", "  ")
		if err := os.MkdirAll("../testdata/proofs/checkpoint", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(vectorFile, append(b, '\n'), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	b, err := os.ReadFile(vectorFile)
	if err != nil {
		t.Fatal(err)
	}
	var v treeVector
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatal(err)
	}
	leaves := make([]checkpoint.Leaf, len(v.Leaves))
	for i, l := range v.Leaves {
		leaves[i] = checkpoint.Leaf{Chain: l.Chain, Size: l.Size, Root: hash(l.Root)}
		if h := leaves[i].Hash(); h != hash(l.LeafHash) {
			t.Fatalf("leaf %s: hash %x, vector %s", l.Chain, h, l.LeafHash)
		}
	}
	tree, err := checkpoint.NewTree(leaves)
	if err != nil {
		t.Fatal(err)
	}
	if root := tree.Root(); root != hash(v.Root) {
		t.Fatalf("root %x, vector %s", root, v.Root)
	}
	cp, err := checkpoint.Parse([]byte(v.NoteText))
	if err != nil || cp.Root != hash(v.Root) || cp.Size != uint64(len(leaves)) || cp.Origin != v.Origin {
		t.Fatalf("note text: %+v %v", cp, err)
	}
	if _, err := checkpoint.NewTree([]checkpoint.Leaf{leaves[1], leaves[0]}); !errors.Is(err, checkpoint.ErrLeafOrder) {
		t.Fatalf("leaves out of order: %v", err)
	}
}

func ptr(h merkle.Hash) *merkle.Hash { return &h }

func TestSignOpen(t *testing.T) {
	cp := checkpoint.Checkpoint{Origin: "ledger.example/test", Size: 7, Root: merkle.HashLeaf([]byte("x"))}
	signed, err := checkpoint.Sign(cp, testSigner)
	if err != nil {
		t.Fatal(err)
	}
	got, err := checkpoint.Open(signed, testVerifier)
	if err != nil || got != cp {
		t.Fatalf("open: %+v %v", got, err)
	}
	other := cp
	other.Origin = "ledger.example/other"
	var mismatch *checkpoint.OriginMismatchError
	if _, err := checkpoint.Sign(other, testSigner); !errors.As(err, &mismatch) {
		t.Fatalf("sign with a key of another name: %v", err)
	}
	_, otherVerifier, _ := note.GenerateKey(nil, "ledger.example/test")
	if _, err := checkpoint.Open(signed, otherVerifier); !errors.Is(err, checkpoint.ErrSignature) {
		t.Fatalf("another key of the same name: %v", err)
	}
	bad := append([]byte(nil), signed...)
	bad[len(bad)-5] ^= 1
	if _, err := checkpoint.Open(bad, testVerifier); !errors.Is(err, checkpoint.ErrSignature) && !errors.Is(err, checkpoint.ErrMalformed) {
		t.Fatalf("changed signature: %v", err)
	}
}

func TestParseRefuses(t *testing.T) {
	for _, text := range []string{
		"", "o\n1\n", "o\n01\nAAAA\n", "o\n1\nAAAA\n",
		"o\n1\n" + "47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU=", // no newline
		"o o\n1\n47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU=\n",
		"o\n-1\n47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU=\n",
		"o\n1\n47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU=\n\n",
	} {
		if _, err := checkpoint.Parse([]byte(text)); !errors.Is(err, checkpoint.ErrMalformed) {
			t.Fatalf("%q: %v", text, err)
		}
	}
}

func FuzzParse(f *testing.F) {
	f.Add([]byte("ledger.example/test\n3\n47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU=\n"))
	f.Add([]byte("o\n18446744073709551615\n47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU=\next\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		cp, err := checkpoint.Parse(b)
		if err != nil {
			return
		}
		again, err := checkpoint.Parse(cp.Marshal())
		if err != nil || again != cp {
			t.Fatalf("re-parse of %q: %+v %v", cp.Marshal(), again, err)
		}
	})
}

func FuzzOpen(f *testing.F) {
	cp := checkpoint.Checkpoint{Origin: "ledger.example/test", Size: 7, Root: merkle.HashLeaf([]byte("x"))}
	signed, err := checkpoint.Sign(cp, testSigner)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(signed)
	f.Add([]byte("ledger.example/test\n1\n\n— x y\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		got, err := checkpoint.Open(b, testVerifier)
		if err != nil {
			return
		}
		if got.Origin != "ledger.example/test" {
			t.Fatalf("opened a checkpoint of origin %q", got.Origin)
		}
	})
}
