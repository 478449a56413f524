package chain

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/ledgerworks/ledger/merkle"
	"github.com/ledgerworks/ledger/storage"
)

// stateSink is a storage.Tx that serves only state: what the committer's
// treeBatch costs and writes without its store. With keep set, it keeps
// what it is given (by reference, as a store may until the commit).
type stateSink struct {
	storage.Tx
	keep  bool
	state map[string][]byte
	puts  int
}

func (s *stateSink) StateGet(ctx context.Context, key []byte) ([]byte, error) {
	if v, ok := s.state[string(key)]; ok {
		return v, nil
	}
	return nil, storage.ErrNotFound
}

func (s *stateSink) StatePut(ctx context.Context, key, value []byte) error {
	s.puts++
	if s.keep {
		if s.state == nil {
			s.state = map[string][]byte{}
		}
		s.state[string(key)] = value
	}
	return nil
}

// TestTreeBatchDefersWhatItNeedNotStore runs the committer's treeBatch
// without its idle hashing over a chain that begins with a batch of 3
// (so that its tiles do not line up with the range's lag) and goes on one
// append a transaction: every transaction must store the range when it
// would lag by treeRangeLagMax and a stored node in the transaction that
// completes it, each equal to the model's; Close's flushCache stores the
// range at the chain's head; hashIdle, called now and then, settles the
// deferred leaves without storing.
func TestTreeBatchDefersWhatItNeedNotStore(t *testing.T) {
	ctx := context.Background()
	b := newTreeBatch()
	sink := &stateSink{keep: true}
	var model merkle.Range
	nodes := map[string]merkle.Hash{}
	var seq uint64
	txn := func(n int) {
		b.reset()
		for range n {
			seq++
			var h Hash
			h[0], h[1] = byte(seq), byte(seq>>8)
			if err := b.add(ctx, sink, "c", seq, &h); err != nil {
				t.Fatal(err)
			}
			model.Append(LeafHash(h), func(level uint, index uint64, h merkle.Hash) {
				if level >= TreeStoredLevel {
					nodes[string(treeNodeKey("c", level, index))] = h
				}
			})
		}
		if err := b.flush(ctx, sink); err != nil {
			t.Fatal(err)
		}
		b.committed()
		v, ok := sink.state[string(treeRangeKey("c"))]
		if !ok {
			t.Fatalf("seq %d: no range stored", seq)
		}
		r, err := merkle.DecodeRange(v)
		if err != nil {
			t.Fatal(err)
		}
		if seq-r.Size >= treeRangeLagMax || n > 1 && r.Size != seq {
			t.Fatalf("seq %d: stored range of size %d", seq, r.Size)
		}
		for key, want := range nodes {
			if got := sink.state[key]; string(got) != string(want[:]) {
				t.Fatalf("seq %d: node %x stored as %x, want %x", seq, key, got, want)
			}
		}
	}
	txn(3)
	for i := range 600 {
		txn(1)
		if i%7 == 0 { // seq 256's among them
			b.hashIdle(func() bool { return false })
		}
	}
	if len(nodes) != 3 { // 603 leaves: two tiles and the node above them
		t.Fatalf("%d stored nodes in the model", len(nodes))
	}
	if err := b.flushCache(ctx, sink); err != nil {
		t.Fatal(err)
	}
	if got := sink.state[string(treeRangeKey("c"))]; string(got) != string(model.AppendBinary(nil)) {
		t.Fatalf("range stored at Close %x, want %x", got, model.AppendBinary(nil))
	}
	b.hashIdle(func() bool { return false })
	if tr := b.cache["c"]; tr.r.Size != seq || len(tr.deferred) != 0 || tr.r.Root() != model.Root() {
		t.Fatalf("after hashIdle: size %d, %d deferred", tr.r.Size, len(tr.deferred))
	}
}

// BenchmarkTreeBatch is the committer's tree upkeep alone for one group:
// P2's shapes, 64 chains appended once each, and one chain appended 64
// times, with every chain's tree in the committer's cache. Report ns per
// append in the transaction (add, flush, committed) and idle-ns per append
// (the deferred leaves hashed while the committer waits for requests).
func BenchmarkTreeBatch(b *testing.B) {
	for _, chains := range []int{64, 1} {
		b.Run(fmt.Sprintf("chains=%d", chains), func(b *testing.B) {
			const group = 64
			ctx := context.Background()
			tb := newTreeBatch()
			stx := &stateSink{}
			names := make([]string, chains)
			seqs := make([]uint64, chains)
			for i := range names {
				names[i] = fmt.Sprintf("account/%08d", i)
			}
			var h Hash
			var idle time.Duration
			never := func() bool { return false }
			run := func() {
				tb.reset()
				for i := range group {
					c := i % chains
					seqs[c]++
					h[0], h[1] = byte(seqs[c]), byte(c)
					if err := tb.add(ctx, stx, names[c], seqs[c], &h); err != nil {
						b.Fatal(err)
					}
				}
				if err := tb.flush(ctx, stx); err != nil {
					b.Fatal(err)
				}
				tb.committed()
				start := time.Now()
				tb.hashIdle(never)
				idle += time.Since(start)
			}
			run() // every chain in the cache
			idle = 0
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				run()
			}
			b.ReportMetric(float64((b.Elapsed()-idle).Nanoseconds())/float64(b.N*group), "ns/append")
			b.ReportMetric(float64(idle.Nanoseconds())/float64(b.N*group), "idle-ns/append")
		})
	}
}

// TestTreeBatchIdleSkipsWhatDidNotCommit leaves a chain's leaves deferred
// (listed for hashIdle) below a tile's end, then runs a transaction that
// appends past it and does not commit: hashIdle must drop that tree, not
// hash leaves that never happened, and the next transaction reads the
// chain's tree from the store again.
func TestTreeBatchIdleSkipsWhatDidNotCommit(t *testing.T) {
	ctx := context.Background()
	b := newTreeBatch()
	sink := &stateSink{keep: true}
	var h Hash
	for seq := uint64(1); seq <= 250; seq++ {
		b.reset()
		h[0] = byte(seq)
		if err := b.add(ctx, sink, "c", seq, &h); err != nil {
			t.Fatal(err)
		}
		if err := b.flush(ctx, sink); err != nil {
			t.Fatal(err)
		}
		b.committed()
	}
	b.reset()
	for seq := uint64(251); seq <= 260; seq++ { // rolled back: no flush, no commit
		if err := b.add(ctx, sink, "c", seq, &h); err != nil {
			t.Fatal(err)
		}
	}
	b.hashIdle(func() bool { return false })
	if _, ok := b.cache["c"]; ok {
		t.Fatal("the tree of a transaction that did not commit is still cached")
	}
	if _, ok := b.dropped["c"]; !ok {
		t.Fatal("the dropped chain is not named for Close")
	}
}
