package merkle_test

import (
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"testing"

	"github.com/ledgerworks/ledger/merkle"
	"github.com/transparency-dev/merkle/proof"
	"github.com/transparency-dev/merkle/rfc6962"
)

// leaves returns the leaf hashes of n distinct leaves.
func leaves(n int) []merkle.Hash {
	out := make([]merkle.Hash, n)
	for i := range out {
		out[i] = merkle.HashLeaf(binary.BigEndian.AppendUint64(nil, uint64(i)))
	}
	return out
}

// mth is RFC 9162's definition, written as plainly as it reads.
func mth(l []merkle.Hash) merkle.Hash {
	switch len(l) {
	case 0:
		return sha256.Sum256(nil)
	case 1:
		return l[0]
	}
	k := 1
	for k*2 < len(l) {
		k *= 2
	}
	a, b := mth(l[:k]), mth(l[k:])
	return merkle.HashChildren(&a, &b)
}

// memNodes answers nodes from the leaves by hashing them.
type memNodes []merkle.Hash

func (m memNodes) Node(level uint, index uint64) (merkle.Hash, error) {
	begin := index << level
	end := begin + 1<<level
	if end > uint64(len(m)) {
		return merkle.Hash{}, fmt.Errorf("node %d/%d outside %d leaves", level, index, len(m))
	}
	return mth(m[begin:end]), nil
}

func TestHashesMatchRFC6962Hasher(t *testing.T) {
	data := []byte("entry")
	if got, want := merkle.HashLeaf(data), rfc6962.DefaultHasher.HashLeaf(data); string(got[:]) != string(want) {
		t.Fatalf("leaf %x, rfc6962 %x", got, want)
	}
	l, r := merkle.HashLeaf([]byte("l")), merkle.HashLeaf([]byte("r"))
	if got, want := merkle.HashChildren(&l, &r), rfc6962.DefaultHasher.HashChildren(l[:], r[:]); string(got[:]) != string(want) {
		t.Fatalf("children %x, rfc6962 %x", got, want)
	}
	if got, want := merkle.HashEmpty, rfc6962.DefaultHasher.EmptyRoot(); string(got[:]) != string(want) {
		t.Fatalf("empty %x, rfc6962 %x", got, want)
	}
}

func TestRangeRootAndVisits(t *testing.T) {
	all := leaves(300)
	var r merkle.Range
	stored := map[[2]uint64]merkle.Hash{}
	for n := 0; n <= len(all); n++ {
		if got, want := r.Root(), mth(all[:n]); got != want {
			t.Fatalf("size %d: root %x, want %x", n, got, want)
		}
		enc := r.AppendBinary(nil)
		back, err := merkle.DecodeRange(enc)
		if err != nil || back.Root() != r.Root() || back.Size != r.Size {
			t.Fatalf("size %d: decode %v", n, err)
		}
		if n == len(all) {
			break
		}
		r.Append(all[n], func(level uint, index uint64, h merkle.Hash) {
			stored[[2]uint64{uint64(level), index}] = h
		})
	}
	for key, h := range stored {
		want, _ := memNodes(all).Node(uint(key[0]), key[1])
		if h != want {
			t.Fatalf("node %v: %x, want %x", key, h, want)
		}
	}
	if want := len(all) - 4; len(stored) != want { // 300 leaves complete 300-popcount(300) nodes
		t.Fatalf("%d nodes visited, want %d", len(stored), want)
	}
}

func FuzzDecodeRange(f *testing.F) {
	var r merkle.Range
	for _, l := range leaves(5) {
		r.Append(l, nil)
	}
	f.Add(r.AppendBinary(nil))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := merkle.DecodeRange(b)
		if err != nil {
			return
		}
		if got := r.AppendBinary(nil); string(got) != string(b) {
			t.Fatalf("re-encoded %x, was %x", got, b)
		}
	})
}

func TestDecodeRangeRefusesBadLengths(t *testing.T) {
	for _, b := range [][]byte{nil, make([]byte, 7), binary.BigEndian.AppendUint64(nil, 3)} {
		if _, err := merkle.DecodeRange(b); !errors.Is(err, merkle.ErrRangeEncoding) {
			t.Fatalf("%x: %v", b, err)
		}
	}
}

// TestProofsPassTransparencyDev checks every proof of trees up to 70
// leaves with our verifier and with github.com/transparency-dev/merkle's,
// an implementation written independently of this one.
func TestProofsPassTransparencyDev(t *testing.T) {
	all := leaves(70)
	nodes := memNodes(all)
	for size := uint64(1); size <= uint64(len(all)); size++ {
		root := mth(all[:size])
		if got, err := merkle.RootAt(size, nodes); err != nil || got != root {
			t.Fatalf("RootAt(%d) = %x, %v", size, got, err)
		}
		for index := uint64(0); index < size; index++ {
			p, err := merkle.InclusionProof(index, size, nodes)
			if err != nil {
				t.Fatal(err)
			}
			if err := merkle.VerifyInclusion(index, size, all[index], p, root); err != nil {
				t.Fatalf("inclusion %d/%d: %v", index, size, err)
			}
			if err := proof.VerifyInclusion(rfc6962.DefaultHasher, index, size, all[index][:], toBytes(p), root[:]); err != nil {
				t.Fatalf("transparency-dev inclusion %d/%d: %v", index, size, err)
			}
		}
		for size1 := uint64(0); size1 <= size; size1++ {
			root1 := mth(all[:size1])
			p, err := merkle.ConsistencyProof(size1, size, nodes)
			if err != nil {
				t.Fatal(err)
			}
			if err := merkle.VerifyConsistency(size1, size, p, root1, root); err != nil {
				t.Fatalf("consistency %d→%d: %v", size1, size, err)
			}
			if size1 == 0 {
				continue // transparency-dev takes no root for the empty tree
			}
			if err := proof.VerifyConsistency(rfc6962.DefaultHasher, size1, size, toBytes(p), root1[:], root[:]); err != nil {
				t.Fatalf("transparency-dev consistency %d→%d: %v", size1, size, err)
			}
		}
	}
}

// TestTamperedProofsRefused flips every bit position's byte of every
// hash, drops and adds hashes, and checks that both verifiers refuse.
func TestTamperedProofsRefused(t *testing.T) {
	all := leaves(45)
	nodes := memNodes(all)
	size := uint64(len(all))
	root := mth(all)
	for index := uint64(0); index < size; index += 7 {
		p, _ := merkle.InclusionProof(index, size, nodes)
		for i := range p {
			bad := append([]merkle.Hash(nil), p...)
			bad[i][i%merkle.HashSize] ^= 1
			err := merkle.VerifyInclusion(index, size, all[index], bad, root)
			var mismatch *merkle.RootMismatchError
			if !errors.As(err, &mismatch) || mismatch.Expected != root || mismatch.Calculated == root {
				t.Fatalf("tampered hash %d: %v", i, err)
			}
			if proof.VerifyInclusion(rfc6962.DefaultHasher, index, size, all[index][:], toBytes(bad), root[:]) == nil {
				t.Fatalf("transparency-dev took tampered hash %d", i)
			}
		}
		if err := merkle.VerifyInclusion(index, size, all[index], p[1:], root); !errors.Is(err, merkle.ErrProofLength) {
			t.Fatalf("short proof: %v", err)
		}
		if err := merkle.VerifyInclusion(index, size, all[index], append(p, root), root); !errors.Is(err, merkle.ErrProofLength) {
			t.Fatalf("long proof: %v", err)
		}
		if err := merkle.VerifyInclusion(index, size, all[(index+1)%size], p, root); !errors.Is(err, merkle.ErrRootMismatch) {
			t.Fatalf("other leaf: %v", err)
		}
	}
	if err := merkle.VerifyInclusion(size, size, all[0], nil, root); !errors.Is(err, merkle.ErrIndexOutOfRange) {
		t.Fatalf("index past size: %v", err)
	}
	for size1 := uint64(1); size1 < size; size1 += 5 {
		root1 := mth(all[:size1])
		p, _ := merkle.ConsistencyProof(size1, size, nodes)
		for i := range p {
			bad := append([]merkle.Hash(nil), p...)
			bad[i][0] ^= 0x80
			if err := merkle.VerifyConsistency(size1, size, bad, root1, root); !errors.Is(err, merkle.ErrRootMismatch) {
				t.Fatalf("consistency %d: tampered hash %d: %v", size1, i, err)
			}
			if proof.VerifyConsistency(rfc6962.DefaultHasher, size1, size, toBytes(bad), root1[:], root[:]) == nil {
				t.Fatalf("transparency-dev took tampered consistency hash %d", i)
			}
		}
		if err := merkle.VerifyConsistency(size, size1, p, root, root1); !errors.Is(err, merkle.ErrSizeOrder) {
			t.Fatalf("sizes swapped: %v", err)
		}
		if len(p) > 0 {
			if err := merkle.VerifyConsistency(size1, size, p[:len(p)-1], root1, root); !errors.Is(err, merkle.ErrProofLength) {
				t.Fatalf("short consistency proof: %v", err)
			}
		}
	}
}

func TestProofSizesAtTenMillion(t *testing.T) {
	// Only the lengths: 10,000,000 leaves give 24 hashes at most.
	const size = 10_000_000
	for _, index := range []uint64{0, 1, size / 2, size - 1} {
		if n := len(mustInclusion(t, index, size)); n > 24 {
			t.Fatalf("index %d: %d hashes", index, n)
		}
	}
}

// zeroNodes answers any node with a hash of its position, for proofs whose
// shape, not values, a test checks.
type zeroNodes struct{}

func (zeroNodes) Node(level uint, index uint64) (merkle.Hash, error) {
	return merkle.HashLeaf(binary.BigEndian.AppendUint64([]byte{byte(level)}, index)), nil
}

func mustInclusion(t *testing.T, index, size uint64) []merkle.Hash {
	t.Helper()
	p, err := merkle.InclusionProof(index, size, zeroNodes{})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func toBytes(p []merkle.Hash) [][]byte {
	out := make([][]byte, len(p))
	for i := range p {
		out[i] = p[i][:]
	}
	return out
}
