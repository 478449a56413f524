package chain_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"runtime"
	"testing"

	bbolt "go.etcd.io/bbolt"

	"github.com/ledgerworks/ledger/chain"
	"github.com/ledgerworks/ledger/storage/bolt"
)

// Offsets in a stored record (chain/codec.go): version, time, prev_hash, hash.
const (
	recordPrevHashOffset = 1 + 8
	recordHashOffset     = recordPrevHashOffset + chain.HashSize
)

// tamperLedger is a closed ledger file with chain "a" of 5 entries and chain
// "b" of 3, and the entries as written.
type tamperLedger struct {
	path    string
	entries map[string][]chain.Entry
}

func newTamperLedger(t *testing.T) tamperLedger {
	t.Helper()
	db, path := openFile(t, chain.Options{})
	l := tamperLedger{path: path, entries: map[string][]chain.Entry{}}
	for i := range 5 {
		for _, ch := range []string{"a", "b"} {
			if ch == "b" && i >= 3 {
				continue
			}
			key := ""
			if i%2 == 0 {
				key = fmt.Sprintf("key-%d", i)
			}
			res := mustAppend(t, db, chain.Request{Chain: ch, IdempotencyKey: key, Type: "t/v1", Payload: fmt.Appendf(nil, "%s payload %d", ch, i)})
			l.entries[ch] = append(l.entries[ch], res.Entry)
		}
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	return l
}

// rawLedger gives a tamper function direct access to the bbolt file.
type rawLedger struct {
	t   *testing.T
	btx *bbolt.Tx
}

func (r rawLedger) id(chainName string) uint64 {
	id, err := bolt.ChainID(r.btx, chainName)
	if err != nil {
		r.t.Fatalf("chain id of %q: %v", chainName, err)
	}
	return id
}

func (r rawLedger) get(chainName string, seq uint64) []byte {
	v := bolt.RawEntry(r.btx, r.id(chainName), seq)
	if v == nil {
		r.t.Fatalf("no record at %s/%d", chainName, seq)
	}
	return bytes.Clone(v)
}

func (r rawLedger) put(chainName string, seq uint64, data []byte) {
	if err := bolt.PutRawEntry(r.btx, r.id(chainName), seq, data); err != nil {
		r.t.Fatal(err)
	}
}

func (r rawLedger) delete(chainName string, seq uint64) {
	if err := bolt.DeleteRawEntry(r.btx, r.id(chainName), seq); err != nil {
		r.t.Fatal(err)
	}
}

// setHead rewrites the chain's stored head to e.
func (r rawLedger) setHead(e chain.Entry) {
	chains := r.btx.Bucket(bolt.BucketChains)
	v := bytes.Clone(chains.Get([]byte(e.Chain)))
	binary.BigEndian.PutUint64(v[8:16], e.Seq)
	copy(v[16:48], e.Hash[:])
	binary.BigEndian.PutUint64(v[48:56], uint64(e.TimeUnixNano))
	if err := chains.Put([]byte(e.Chain), v); err != nil {
		r.t.Fatal(err)
	}
}

// rewrite stores e at its position with its hash recomputed, as a forger
// would, and returns it.
func (r rawLedger) rewrite(e chain.Entry) chain.Entry {
	e.Hash = e.ComputeHash()
	r.put(e.Chain, e.Seq, chain.EncodeRecord(&e))
	return e
}

func (l tamperLedger) tamper(t *testing.T, edit func(r rawLedger)) {
	t.Helper()
	bdb, err := bbolt.Open(l.path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer bdb.Close()
	if err := bdb.Update(func(btx *bbolt.Tx) error { edit(rawLedger{t, btx}); return nil }); err != nil {
		t.Fatal(err)
	}
}

func (l tamperLedger) verify(t *testing.T, opts chain.VerifyOptions) chain.Report {
	t.Helper()
	db, err := chain.Open(l.path, chain.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	splits := chain.VerifySplitChains()
	report, err := verifyEachWay(t, db, context.Background(), opts)
	if err != nil {
		t.Fatalf("verify: %v", err)
	}
	if chain.VerifySplitChains() == splits {
		t.Fatal("no chain was verified in chunks")
	}
	return report
}

func TestTamperUntouchedLedgerVerifies(t *testing.T) {
	l := newTamperLedger(t)
	report := l.verify(t, chain.VerifyOptions{ExpectHeads: []chain.Head{l.entries["a"][4].Head(), l.entries["a"][1].Head(), l.entries["b"][2].Head()}})
	assertFailures(t, report.Failures)
	if report.Chains != 2 || report.Entries != 8 {
		t.Fatalf("report %+v", report)
	}
}

func TestTamperFlipPayloadByte(t *testing.T) {
	l := newTamperLedger(t)
	l.tamper(t, func(r rawLedger) {
		rec := r.get("a", 3)
		rec[len(rec)-1] ^= 0x01
		r.put("a", 3, rec)
	})
	report := l.verify(t, chain.VerifyOptions{})
	assertFailures(t, report.Failures, failureKey{"a", 3, chain.ReasonHashMismatch})
	f := report.Failures[0]
	if f.Expected != l.entries["a"][2].Hash || f.Calculated == f.Expected {
		t.Fatalf("failure hashes: %+v", f)
	}
	// Verifying only the other chain finds nothing.
	assertFailures(t, l.verify(t, chain.VerifyOptions{Chains: []string{"b"}}).Failures)
}

func TestTamperFlipTimeByte(t *testing.T) {
	l := newTamperLedger(t)
	l.tamper(t, func(r rawLedger) {
		rec := r.get("b", 1)
		rec[8] ^= 0x80
		r.put("b", 1, rec)
	})
	assertFailures(t, l.verify(t, chain.VerifyOptions{}).Failures, failureKey{"b", 1, chain.ReasonHashMismatch})
}

func TestTamperAlterPrevHash(t *testing.T) {
	l := newTamperLedger(t)
	l.tamper(t, func(r rawLedger) {
		rec := r.get("a", 3)
		rec[recordPrevHashOffset+5] ^= 0x10
		r.put("a", 3, rec)
	})
	// The prev_hash is hashed too: both the hash and the link fail at seq 3.
	assertFailures(t, l.verify(t, chain.VerifyOptions{}).Failures,
		failureKey{"a", 3, chain.ReasonHashMismatch}, failureKey{"a", 3, chain.ReasonBrokenLink})
}

func TestTamperAlterPrevHashAndRehash(t *testing.T) {
	l := newTamperLedger(t)
	l.tamper(t, func(r rawLedger) {
		e := l.entries["a"][2]
		e.PrevHash = chain.Genesis("forged")
		r.rewrite(e)
	})
	// A forger who recomputes the hash breaks the link at seq 3 and, because
	// the hash changed, the link of seq 4.
	assertFailures(t, l.verify(t, chain.VerifyOptions{}).Failures,
		failureKey{"a", 3, chain.ReasonBrokenLink}, failureKey{"a", 4, chain.ReasonBrokenLink})
}

func TestTamperRewritePayloadAndRehash(t *testing.T) {
	l := newTamperLedger(t)
	l.tamper(t, func(r rawLedger) {
		e := l.entries["a"][4] // the newest: no later link to break
		e.Payload = []byte("forged")
		r.rewrite(e)
	})
	// Only the stored head still remembers the original hash.
	assertFailures(t, l.verify(t, chain.VerifyOptions{}).Failures, failureKey{"a", 5, chain.ReasonHeadMismatch})
}

func TestTamperDeleteMiddleEntry(t *testing.T) {
	l := newTamperLedger(t)
	l.tamper(t, func(r rawLedger) { r.delete("a", 3) })
	assertFailures(t, l.verify(t, chain.VerifyOptions{}).Failures, failureKey{"a", 3, chain.ReasonSeqGap})
}

func TestTamperDeleteFirstEntry(t *testing.T) {
	l := newTamperLedger(t)
	l.tamper(t, func(r rawLedger) { r.delete("b", 1) })
	assertFailures(t, l.verify(t, chain.VerifyOptions{}).Failures, failureKey{"b", 1, chain.ReasonSeqGap})
}

func TestTamperSwapTwoEntries(t *testing.T) {
	l := newTamperLedger(t)
	l.tamper(t, func(r rawLedger) {
		second, fourth := r.get("a", 2), r.get("a", 4)
		r.put("a", 2, fourth)
		r.put("a", 4, second)
	})
	// Each moved record no longer hashes at its new seq nor links to its new
	// predecessor, and the entry after each no longer links to it.
	assertFailures(t, l.verify(t, chain.VerifyOptions{}).Failures,
		failureKey{"a", 2, chain.ReasonHashMismatch}, failureKey{"a", 2, chain.ReasonBrokenLink},
		failureKey{"a", 3, chain.ReasonBrokenLink},
		failureKey{"a", 4, chain.ReasonHashMismatch}, failureKey{"a", 4, chain.ReasonBrokenLink},
		failureKey{"a", 5, chain.ReasonBrokenLink})
}

func TestTamperSwapAdjacentEntries(t *testing.T) {
	l := newTamperLedger(t)
	l.tamper(t, func(r rawLedger) {
		first, second := r.get("b", 1), r.get("b", 2)
		r.put("b", 1, second)
		r.put("b", 2, first)
	})
	// The first entry's key now sits at seq 2, while the key index still
	// maps it to seq 1.
	assertFailures(t, l.verify(t, chain.VerifyOptions{}).Failures,
		failureKey{"b", 1, chain.ReasonHashMismatch}, failureKey{"b", 1, chain.ReasonBrokenLink},
		failureKey{"b", 2, chain.ReasonHashMismatch}, failureKey{"b", 2, chain.ReasonBrokenLink},
		failureKey{"b", 2, chain.ReasonKeyIndexMismatch},
		failureKey{"b", 3, chain.ReasonBrokenLink})
}

func TestTamperMoveEntryToAnotherChain(t *testing.T) {
	l := newTamperLedger(t)
	l.tamper(t, func(r rawLedger) { r.put("a", 2, r.get("b", 2)) })
	// The chain id is hashed, so b's record does not hash as a's, and it
	// links to b's first entry.
	assertFailures(t, l.verify(t, chain.VerifyOptions{}).Failures,
		failureKey{"a", 2, chain.ReasonHashMismatch}, failureKey{"a", 2, chain.ReasonBrokenLink},
		failureKey{"a", 3, chain.ReasonBrokenLink})
}

func TestTamperDropLastEntryKeepingTheHead(t *testing.T) {
	l := newTamperLedger(t)
	l.tamper(t, func(r rawLedger) { r.delete("a", 5) })
	assertFailures(t, l.verify(t, chain.VerifyOptions{}).Failures, failureKey{"a", 5, chain.ReasonHeadMismatch})
}

func TestTamperDropLastEntryWithTheHead(t *testing.T) {
	l := newTamperLedger(t)
	l.tamper(t, func(r rawLedger) {
		r.delete("a", 5)
		r.setHead(l.entries["a"][3])
	})
	// The entries and heads are consistent again, but the removed entry had
	// an idempotency key whose index record names a seq past the end.
	assertFailures(t, l.verify(t, chain.VerifyOptions{}).Failures, failureKey{"a", 5, chain.ReasonKeyIndexMismatch})
	saved := l.entries["a"][4].Head()
	assertFailures(t, l.verify(t, chain.VerifyOptions{ExpectHeads: []chain.Head{saved}}).Failures,
		failureKey{"a", 5, chain.ReasonKeyIndexMismatch}, failureKey{"a", 5, chain.ReasonHeadMismatch})
	// A saved head still is honoured when only another chain is selected.
	assertFailures(t, l.verify(t, chain.VerifyOptions{Chains: []string{"b"}, ExpectHeads: []chain.Head{saved}}).Failures,
		failureKey{"a", 5, chain.ReasonKeyIndexMismatch}, failureKey{"a", 5, chain.ReasonHeadMismatch})
	// An older saved head still holds.
	assertFailures(t, l.verify(t, chain.VerifyOptions{ExpectHeads: []chain.Head{l.entries["a"][3].Head()}}).Failures,
		failureKey{"a", 5, chain.ReasonKeyIndexMismatch})
}

// TestTamperDropLastEntriesHeadAndKeys: a truncation that also removes the
// removed entries' index records leaves a consistent file; only a head saved
// elsewhere tells.
func TestTamperDropLastEntriesHeadAndKeys(t *testing.T) {
	l := newTamperLedger(t)
	l.tamper(t, func(r rawLedger) {
		r.delete("a", 5)
		r.delete("a", 4)
		if err := bolt.DeleteKeyRecord(r.btx, "a", l.entries["a"][4].IdempotencyKey); err != nil {
			r.t.Fatal(err)
		}
		r.setHead(l.entries["a"][2])
	})
	assertFailures(t, l.verify(t, chain.VerifyOptions{}).Failures)
	// The chain's stored Merkle tree, left as it was, still has five
	// leaves. A forger who rewrites the tree too is caught only by a saved
	// head or a checkpoint.
	assertFailures(t, l.verify(t, chain.VerifyOptions{Trees: true}).Failures, failureKey{"a", 5, chain.ReasonTreeMismatch})
	assertFailures(t, l.verify(t, chain.VerifyOptions{ExpectHeads: []chain.Head{l.entries["a"][4].Head()}}).Failures,
		failureKey{"a", 5, chain.ReasonHeadMismatch})
}

func TestTamperRewriteChainWholesale(t *testing.T) {
	l := newTamperLedger(t)
	l.tamper(t, func(r rawLedger) {
		prev := l.entries["b"][0].Hash
		var last chain.Entry
		for _, e := range l.entries["b"][1:] {
			e.PrevHash = prev
			e.Payload = append([]byte("forged "), e.Payload...)
			last = r.rewrite(e)
			prev = last.Hash
		}
		r.setHead(last)
	})
	assertFailures(t, l.verify(t, chain.VerifyOptions{}).Failures)
	// The stored Merkle tree, left as it was, is the old entries'.
	assertFailures(t, l.verify(t, chain.VerifyOptions{Trees: true}).Failures, failureKey{"b", 3, chain.ReasonTreeMismatch})
	saved := []chain.Head{l.entries["b"][0].Head(), l.entries["b"][2].Head()}
	assertFailures(t, l.verify(t, chain.VerifyOptions{ExpectHeads: saved}).Failures, failureKey{"b", 3, chain.ReasonHeadMismatch})
}

func TestTamperTruncateRecord(t *testing.T) {
	l := newTamperLedger(t)
	l.tamper(t, func(r rawLedger) {
		r.put("a", 3, r.get("a", 3)[:recordHashOffset+4])
		r.put("b", 3, r.get("b", 3)[:10]) // the newest entry of b
	})
	// The entry after an undecodable one cannot be linked, but is hashed;
	// an undecodable newest entry is not reported twice against its head.
	assertFailures(t, l.verify(t, chain.VerifyOptions{}).Failures,
		failureKey{"a", 3, chain.ReasonUndecodable}, failureKey{"b", 3, chain.ReasonUndecodable})
}

func TestTamperUndecodableAtASavedHead(t *testing.T) {
	l := newTamperLedger(t)
	l.tamper(t, func(r rawLedger) { r.put("a", 2, []byte{9}) })
	report := l.verify(t, chain.VerifyOptions{ExpectHeads: []chain.Head{l.entries["a"][1].Head()}})
	assertFailures(t, report.Failures, failureKey{"a", 2, chain.ReasonUndecodable})
}

func TestTamperFailuresMaxTruncatesTheReport(t *testing.T) {
	l := newTamperLedger(t)
	l.tamper(t, func(r rawLedger) {
		for seq := uint64(1); seq <= 5; seq++ {
			rec := r.get("a", seq)
			rec[len(rec)-1] ^= 1
			r.put("a", seq, rec)
		}
	})
	report := l.verify(t, chain.VerifyOptions{FailuresMax: 2})
	if len(report.Failures) != 2 || !report.Truncated {
		t.Fatalf("report %+v", report)
	}
	if full := l.verify(t, chain.VerifyOptions{}); len(full.Failures) != 5 || full.Truncated {
		t.Fatalf("full report %+v", full)
	}
}

// A long chain tampered with around the places where a verifier that works
// in batches hands over: every failure is still found, exactly once.
func TestTamperLongChainAcrossBatches(t *testing.T) {
	db, path := openFile(t, chain.Options{})
	var entries []chain.Entry
	err := db.Update(context.Background(), func(tx *chain.Tx) error {
		entries = entries[:0]
		for i := range 700 {
			res, err := tx.Append(chain.Request{Chain: "long", Type: "t", Payload: fmt.Appendf(nil, "entry %d", i+1)})
			if err != nil {
				return err
			}
			entries = append(entries, res.Entry)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	l := tamperLedger{path: path, entries: map[string][]chain.Entry{"long": entries}}
	l.tamper(t, func(r rawLedger) {
		rec := r.get("long", 256)
		rec[len(rec)-1] ^= 1
		r.put("long", 256, rec)
		e := entries[256] // seq 257
		e.PrevHash = chain.Genesis("forged")
		r.rewrite(e)
		r.delete("long", 513)
		r.put("long", 600, r.get("long", 600)[:20])
		r.delete("long", 700)
	})
	for _, cpu := range []int{1, 4} {
		t.Run(fmt.Sprint("GOMAXPROCS=", cpu), func(t *testing.T) {
			defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(cpu))
			report := l.verify(t, chain.VerifyOptions{})
			assertFailures(t, report.Failures,
				failureKey{"long", 256, chain.ReasonHashMismatch},
				failureKey{"long", 257, chain.ReasonBrokenLink},
				failureKey{"long", 258, chain.ReasonBrokenLink},
				failureKey{"long", 513, chain.ReasonSeqGap},
				failureKey{"long", 600, chain.ReasonUndecodable},
				failureKey{"long", 700, chain.ReasonHeadMismatch})
			if report.Entries != 698 {
				t.Fatalf("%d entries checked, want 698", report.Entries)
			}
		})
	}
}
