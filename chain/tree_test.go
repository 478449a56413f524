package chain_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/ledgerworks/ledger/chain"
	"github.com/ledgerworks/ledger/chain/chaintest"
	"github.com/ledgerworks/ledger/merkle"
	"github.com/transparency-dev/merkle/proof"
	"github.com/transparency-dev/merkle/rfc6962"
)

// treeModel is the plain model of the chains' trees: every entry's leaf
// hash, in seq order.
type treeModel map[string][]merkle.Hash

func (m treeModel) root(chain string, size uint64) merkle.Hash {
	var r merkle.Range
	for _, l := range m[chain][:size] {
		r.Append(l, nil)
	}
	return r.Root()
}

func (m treeModel) add(res chain.Result) {
	m[res.Entry.Chain] = append(m[res.Entry.Chain], chain.LeafHash(res.Entry.Hash))
}

// appendMixed appends n entries to three chains by Append, AppendBatch and
// Update (with a failing function among them), recording them in m.
func appendMixed(t *testing.T, db *chain.DB, m treeModel, n int, rng *rand.Rand) {
	t.Helper()
	ctx := context.Background()
	for i := 0; i < n; {
		c := fmt.Sprintf("tree/c%d", rng.IntN(3))
		switch rng.IntN(3) {
		case 0:
			m.add(mustAppend(t, db, chain.Request{Chain: c, Type: "t/v1", Payload: []byte{byte(i)}}))
			i++
		case 1:
			k := 1 + rng.IntN(600)
			var reqs []chain.Request
			for j := range k {
				reqs = append(reqs, chain.Request{Chain: fmt.Sprintf("tree/c%d", j%3), Type: "t/v1", Payload: []byte{byte(j)}})
			}
			results, err := db.AppendBatch(ctx, reqs, nil)
			if err != nil {
				t.Fatal(err)
			}
			for _, res := range results {
				m.add(res)
			}
			i += k
		default:
			errRollback := errors.New("rolled back")
			err := db.Update(ctx, func(tx *chain.Tx) error {
				if _, err := tx.Append(chain.Request{Chain: c, Type: "t/v1"}); err != nil {
					return err
				}
				return errRollback
			})
			if !errors.Is(err, errRollback) {
				t.Fatal(err)
			}
		}
	}
}

func TestTreesFollowTheEntries(t *testing.T) {
	forEachBackend(t, chain.Options{}, func(t *testing.T, db *chain.DB) {
		rng := rand.New(rand.NewPCG(1, 2))
		m := treeModel{}
		appendMixed(t, db, m, 1500, rng)
		ctx := context.Background()
		err := db.View(ctx, func(tx *chain.Tx) error {
			for c, leaves := range m {
				head, err := tx.TreeHead(c)
				if err != nil {
					return err
				}
				n := uint64(len(leaves))
				if head.Size != n || head.Root != m.root(c, n) {
					t.Fatalf("%s: tree head %d %x, model %d %x", c, head.Size, head.Root, n, m.root(c, n))
				}
				for range 40 {
					size := 1 + rng.Uint64N(n)
					seq := 1 + rng.Uint64N(size)
					root, err := tx.TreeRoot(c, size)
					if err != nil {
						return err
					}
					if root != m.root(c, size) {
						t.Fatalf("%s: root at %d differs from the model's", c, size)
					}
					p, err := tx.InclusionProof(c, seq, size)
					if err != nil {
						return err
					}
					leaf := leaves[seq-1]
					if err := proof.VerifyInclusion(rfc6962.DefaultHasher, seq-1, size, leaf[:], toBytes(p), root[:]); err != nil {
						t.Fatalf("%s: inclusion of %d in %d: %v", c, seq, size, err)
					}
					size1 := rng.Uint64N(size) + 1
					p, err = tx.ConsistencyProof(c, size1, size)
					if err != nil {
						return err
					}
					root1 := m.root(c, size1)
					if err := proof.VerifyConsistency(rfc6962.DefaultHasher, size1, size, toBytes(p), root1[:], root[:]); err != nil {
						t.Fatalf("%s: consistency %d→%d: %v", c, size1, size, err)
					}
				}
				if _, err := tx.InclusionProof(c, n+1, n+1); !errors.Is(err, chain.ErrNotFound) {
					t.Fatalf("proof past the end: %v", err)
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		assertVerifies(t, db)
	})
}

// TestTreesCaughtUpWhenOpenedForWriting writes with NoTrees (as a version
// without trees did) and checks that the next Open for writing builds
// them, and that appends before that Open extend a lagging tree too.
func TestTreesCaughtUpWhenOpenedForWriting(t *testing.T) {
	db, path := openFile(t, chain.Options{NoTrees: true})
	m := treeModel{}
	appendMixed(t, db, m, 700, rand.New(rand.NewPCG(3, 4)))
	ctx := context.Background()
	err := db.View(ctx, func(tx *chain.Tx) error {
		_, err := tx.TreeHead("tree/c0")
		return err
	})
	if !errors.Is(err, chain.ErrTreeBehind) {
		t.Fatalf("tree head without trees: %v", err)
	}
	assertVerifies(t, db) // no tree is not a broken tree
	db.Close()
	db, err = chain.Open(path, chain.Options{Clock: testClock()})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	m.add(mustAppend(t, db, chain.Request{Chain: "tree/c1", Type: "t/v1"}))
	err = db.View(ctx, func(tx *chain.Tx) error {
		for c, leaves := range m {
			head, err := tx.TreeHead(c)
			if err != nil {
				return err
			}
			if n := uint64(len(leaves)); head.Size != n || head.Root != m.root(c, n) {
				t.Fatalf("%s: tree %d, model %d", c, head.Size, n)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	assertVerifies(t, db)
}

func TestVerifyExpectTrees(t *testing.T) {
	forEachBackend(t, chain.Options{}, func(t *testing.T, db *chain.DB) {
		m := treeModel{}
		for i := range 600 {
			m.add(mustAppend(t, db, chain.Request{Chain: fmt.Sprintf("v%d", i%2), Type: "t/v1", Payload: []byte{byte(i)}}))
		}
		ctx := context.Background()
		ok := []chain.TreeHead{{Chain: "v0", Size: 300, Root: m.root("v0", 300)}, {Chain: "v1", Size: 17, Root: m.root("v1", 17)}}
		r, err := db.Verify(ctx, chain.VerifyOptions{ExpectTrees: ok})
		if err != nil || !r.OK() {
			t.Fatalf("verify %v %+v", err, r.Failures)
		}
		bad := []chain.TreeHead{
			{Chain: "v0", Size: 301, Root: m.root("v0", 300)}, // more than the chain holds
			{Chain: "v1", Size: 17, Root: m.root("v1", 16)},   // another root
			{Chain: "gone", Size: 3, Root: merkle.HashEmpty},  // a chain that is not there
			{Chain: "v1", Size: 0, Root: merkle.HashEmpty},    // the empty tree holds
		}
		r, err = db.Verify(ctx, chain.VerifyOptions{ExpectTrees: bad})
		if err != nil {
			t.Fatal(err)
		}
		assertFailures(t, r.Failures,
			failureKey{"gone", 3, chain.ReasonTruncated},
			failureKey{"v0", 301, chain.ReasonTruncated},
			failureKey{"v1", 17, chain.ReasonTreeHeadMismatch})
		var mismatch chain.Failure
		for _, f := range r.Failures {
			if f.Reason == chain.ReasonTreeHeadMismatch {
				mismatch = f
			}
		}
		if mismatch.Expected != chain.Hash(m.root("v1", 16)) || mismatch.Calculated != chain.Hash(m.root("v1", 17)) {
			t.Fatalf("mismatch carries %x and %x", mismatch.Expected, mismatch.Calculated)
		}
	})
}

// TestVerifyFindsATamperedTree changes a stored node and the compact range
// behind the engine's back.
func TestVerifyFindsATamperedTree(t *testing.T) {
	forEachBackend(t, chain.Options{}, func(t *testing.T, db *chain.DB) {
		for i := range 600 {
			mustAppend(t, db, chain.Request{Chain: "t", Type: "t/v1", Payload: []byte{byte(i)}})
		}
		ctx := context.Background()
		stx, err := db.Backend().Begin(ctx, true)
		if err != nil {
			t.Fatal(err)
		}
		node := append([]byte("\x00tree/v1/n/t\x00\x08"), 0, 0, 0, 0, 0, 0, 0, 1)
		if _, err := stx.StateGet(ctx, node); err != nil {
			t.Fatalf("node 8/1 not stored: %v", err)
		}
		if err := stx.StatePut(ctx, node, make([]byte, 32)); err != nil {
			t.Fatal(err)
		}
		if err := stx.Commit(); err != nil {
			t.Fatal(err)
		}
		r, err := db.Verify(ctx, chain.VerifyOptions{Trees: true})
		if err != nil {
			t.Fatal(err)
		}
		assertFailures(t, r.Failures, failureKey{"t", 512, chain.ReasonTreeMismatch})
		err = db.View(ctx, func(tx *chain.Tx) error {
			p, err := tx.InclusionProof("t", 1, 600)
			if err != nil {
				return err
			}
			head, err := tx.TreeHead("t")
			if err != nil {
				return err
			}
			if merkle.VerifyInclusion(0, 600, merkle.Hash{}, p, head.Root) == nil {
				t.Fatal("a proof from a tampered node verified")
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	})
}

func TestEngineStateKeysRefused(t *testing.T) {
	db, _ := openFile(t, chain.Options{})
	mustAppend(t, db, chain.Request{Chain: "a", Type: "t/v1"})
	err := db.Update(context.Background(), func(tx *chain.Tx) error {
		for kv, err := range tx.StateScan(nil, nil, false) {
			if err != nil {
				return err
			}
			t.Fatalf("scan yields the engine's key %q", kv.Key)
		}
		if err := tx.StatePut([]byte("\x00tree/v1/r/a"), nil); !errors.Is(err, chain.ErrInvalid) {
			t.Fatalf("put of an engine key: %v", err)
		}
		return tx.StateDelete([]byte("\x00tree/v1/r/a"))
	})
	if !errors.Is(err, chain.ErrInvalid) {
		t.Fatalf("delete of an engine key: %v", err)
	}
}

func toBytes(p []merkle.Hash) [][]byte {
	out := make([][]byte, len(p))
	for i := range p {
		out[i] = p[i][:]
	}
	return out
}

// TestTreeRangesLagAndCatchUp appends one entry at a time, so that the
// stored ranges lag their chains (treeRangeLagMax), and checks that every
// reader sees the tree at the head, and that Close stores the ranges.
func TestTreeRangesLagAndCatchUp(t *testing.T) {
	forEachBackend(t, chain.Options{}, func(t *testing.T, db *chain.DB) {
		m := treeModel{}
		for i := range 300 {
			m.add(mustAppend(t, db, chain.Request{Chain: fmt.Sprintf("lag/%d", i%7), Type: "t/v1", Payload: []byte{byte(i)}}))
		}
		heads, err := db.TreeHeads(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		for _, h := range heads {
			n := uint64(len(m[h.Chain]))
			if h.Size != n || h.Root != m.root(h.Chain, n) {
				t.Fatalf("%s: head %d, model %d", h.Chain, h.Size, n)
			}
		}
		err = db.View(context.Background(), func(tx *chain.Tx) error {
			p, err := tx.InclusionProof("lag/3", 43, 43)
			if err != nil {
				return err
			}
			return merkle.VerifyInclusion(42, 43, m["lag/3"][42], p, m.root("lag/3", 43))
		})
		if err != nil {
			t.Fatal(err)
		}
		assertVerifies(t, db)
	})
}

// TestTreesOfTwoProcesses appends to the same chains from two ledgers on
// one PostgreSQL schema, as two processes of a service do: each one's
// cached ranges go stale when the other appends, and every tree must
// still be the tree of the entries.
func TestTreesOfTwoProcesses(t *testing.T) {
	a, b := chaintest.OpenShared(t)
	m := treeModel{}
	for i := range 120 {
		db := a
		if i%3 == 0 {
			db = b
		}
		m.add(mustAppend(t, db, chain.Request{Chain: fmt.Sprintf("shared/%d", i%2), Type: "t/v1", Payload: []byte{byte(i)}}))
	}
	for _, db := range []*chain.DB{a, b} {
		heads, err := db.TreeHeads(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		for _, h := range heads {
			if n := uint64(len(m[h.Chain])); h.Size != n || h.Root != m.root(h.Chain, n) {
				t.Fatalf("%s: tree head %d, model %d", h.Chain, h.Size, n)
			}
		}
		assertVerifies(t, db)
	}
}
