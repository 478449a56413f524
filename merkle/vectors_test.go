package merkle_test

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"flag"
	"os"
	"testing"

	"github.com/ledgerworks/ledger/merkle"
)

var update = flag.Bool("update", false, "rewrite testdata/proofs/tree/rfc9162.json")

const treeVectors = "../testdata/proofs/tree/rfc9162.json"

// treeVector is testdata/proofs/tree/rfc9162.json: a chain tree over
// entry hashes (the leaves' data) and, for each size, its root and every
// proof.
type treeVector struct {
	Description string   `json:"description"`
	Leaves      []string `json:"leaves"` // the entries' hashes, whose leaf hashes are the tree's leaves
	Trees       []struct {
		Size        uint64     `json:"size"`
		Root        string     `json:"root"`
		Inclusion   [][]string `json:"inclusion"`   // [i] is the path of leaf i
		Consistency [][]string `json:"consistency"` // [m-1] is the proof from size m
	} `json:"trees"`
}

func hexes(p []merkle.Hash) []string {
	out := make([]string, len(p))
	for i := range p {
		out[i] = hex.EncodeToString(p[i][:])
	}
	return out
}

func buildTreeVector(t *testing.T) treeVector {
	v := treeVector{Description: "leaf i is SHA-256(0x00 || leaves[i]), leaves[i] = SHA-256(\"entry \" || decimal i) standing for an entry hash"}
	var leafHashes []merkle.Hash
	for i := range 9 {
		h := sha256.Sum256([]byte("entry " + string(rune('0'+i))))
		v.Leaves = append(v.Leaves, hex.EncodeToString(h[:]))
		leafHashes = append(leafHashes, merkle.HashLeaf(h[:]))
	}
	for size := uint64(1); size <= uint64(len(leafHashes)); size++ {
		nodes := memNodes(leafHashes[:size])
		root := mth(leafHashes[:size])
		tree := struct {
			Size        uint64     `json:"size"`
			Root        string     `json:"root"`
			Inclusion   [][]string `json:"inclusion"`
			Consistency [][]string `json:"consistency"`
		}{Size: size, Root: hex.EncodeToString(root[:])}
		for i := range size {
			p, err := merkle.InclusionProof(i, size, nodes)
			if err != nil {
				t.Fatal(err)
			}
			tree.Inclusion = append(tree.Inclusion, hexes(p))
		}
		for m := uint64(1); m <= size; m++ {
			p, err := merkle.ConsistencyProof(m, size, nodes)
			if err != nil {
				t.Fatal(err)
			}
			tree.Consistency = append(tree.Consistency, hexes(p))
		}
		v.Trees = append(v.Trees, tree)
	}
	return v
}

// TestTreeVectors checks the committed vectors against the code and
// verifies every proof in them.
func TestTreeVectors(t *testing.T) {
	want := buildTreeVector(t)
	b, _ := json.MarshalIndent(want, "", "  ")
	b = append(b, '\n')
	if *update {
		os.MkdirAll("../testdata/proofs/tree", 0o755)
		if err := os.WriteFile(treeVectors, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile(treeVectors)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != string(b) {
		t.Fatalf("%s differs from the code's vectors: run go test ./merkle -run TestTreeVectors -update", treeVectors)
	}
	for _, tree := range want.Trees {
		var root merkle.Hash
		hex.Decode(root[:], []byte(tree.Root))
		for i, path := range tree.Inclusion {
			data, _ := hex.DecodeString(want.Leaves[i])
			if err := merkle.VerifyInclusion(uint64(i), tree.Size, merkle.HashLeaf(data), decode(path), root); err != nil {
				t.Fatalf("size %d leaf %d: %v", tree.Size, i, err)
			}
		}
		for m, proof := range tree.Consistency {
			var root1 merkle.Hash
			hex.Decode(root1[:], []byte(want.Trees[m].Root))
			if err := merkle.VerifyConsistency(uint64(m+1), tree.Size, decode(proof), root1, root); err != nil {
				t.Fatalf("consistency %d→%d: %v", m+1, tree.Size, err)
			}
		}
	}
}

func decode(p []string) []merkle.Hash {
	out := make([]merkle.Hash, len(p))
	for i := range p {
		hex.Decode(out[i][:], []byte(p[i]))
	}
	return out
}
