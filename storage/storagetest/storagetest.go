package storagetest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"reflect"
	"testing"

	"github.com/ledgerworks/ledger/storage"
)

// Run checks that the backends returned by open keep the storage contract.
// Each subtest gets a fresh store.
func Run(t *testing.T, open func(t testing.TB) storage.Backend) {
	tests := []struct {
		name string
		fn   func(t *testing.T, b storage.Backend)
	}{
		{"EmptyChain", testEmptyChain},
		{"AppendAndRead", testAppendAndRead},
		{"DuplicateKey", testDuplicateKey},
		{"WrongSeq", testWrongSeq},
		{"RollbackDiscards", testRollbackDiscards},
		{"ReadOwnWrites", testReadOwnWrites},
		{"EntriesFrom", testEntriesFrom},
		{"ChainsOrdered", testChainsOrdered},
		{"KeysPerChain", testKeysPerChain},
		{"State", testState},
		{"StateScanBounds", testStateScanBounds},
		{"ReadOnlyTx", testReadOnlyTx},
		{"TxDone", testTxDone},
		{"Stats", testStats},
	}
	tests = append(tests, keyScanTests...)
	tests = append(tests, keyReaderTests...)
	for _, test := range tests {
		t.Run(test.name, func(t *testing.T) { test.fn(t, open(t)) })
	}
}

var ctx = context.Background()

func head(seq uint64) storage.Head {
	h := storage.Head{Seq: seq, TimeUnixNano: int64(seq) * 1000}
	h.Hash[0] = byte(seq)
	h.Hash[31] = 0xAB
	return h
}

func record(seq uint64, key string) storage.Record {
	return storage.Record{Seq: seq, IdempotencyKey: key, Data: []byte(fmt.Sprintf("entry-%d-%s", seq, key))}
}

func update(t *testing.T, b storage.Backend, fn func(tx storage.Tx) error) error {
	t.Helper()
	tx, err := b.Begin(ctx, true)
	if err != nil {
		t.Fatalf("begin: %v", err)
	}
	if err := fn(tx); err != nil {
		tx.Rollback()
		return err
	}
	return tx.Commit()
}

func view(t *testing.T, b storage.Backend, fn func(tx storage.Tx)) {
	t.Helper()
	tx, err := b.Begin(ctx, false)
	if err != nil {
		t.Fatalf("begin: %v", err)
	}
	defer tx.Rollback()
	fn(tx)
}

func appendN(t *testing.T, b storage.Backend, chain string, from, to uint64) {
	t.Helper()
	err := update(t, b, func(tx storage.Tx) error {
		for seq := from; seq <= to; seq++ {
			if err := tx.Append(ctx, chain, record(seq, fmt.Sprintf("k%d", seq)), head(seq)); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatalf("append %s %d..%d: %v", chain, from, to, err)
	}
}

func testEmptyChain(t *testing.T, b storage.Backend) {
	view(t, b, func(tx storage.Tx) {
		if _, err := tx.Head(ctx, "none"); !errors.Is(err, storage.ErrNotFound) {
			t.Errorf("Head of missing chain: %v, want ErrNotFound", err)
		}
		if _, err := tx.Entry(ctx, "none", 1); !errors.Is(err, storage.ErrNotFound) {
			t.Errorf("Entry of missing chain: %v, want ErrNotFound", err)
		}
		if _, err := tx.LookupKey(ctx, "none", "k"); !errors.Is(err, storage.ErrNotFound) {
			t.Errorf("LookupKey of missing chain: %v, want ErrNotFound", err)
		}
		for rec, err := range tx.Entries(ctx, "none", 1) {
			t.Errorf("Entries of missing chain yielded %v, %v", rec, err)
		}
	})
}

func testAppendAndRead(t *testing.T, b storage.Backend) {
	appendN(t, b, "a", 1, 3)
	view(t, b, func(tx storage.Tx) {
		h, err := tx.Head(ctx, "a")
		if err != nil || h != head(3) {
			t.Errorf("Head = %v, %v; want %v", h, err, head(3))
		}
		for seq := uint64(1); seq <= 3; seq++ {
			data, err := tx.Entry(ctx, "a", seq)
			want := record(seq, fmt.Sprintf("k%d", seq)).Data
			if err != nil || !bytes.Equal(data, want) {
				t.Errorf("Entry(%d) = %q, %v; want %q", seq, data, err, want)
			}
			got, err := tx.LookupKey(ctx, "a", fmt.Sprintf("k%d", seq))
			if err != nil || got != seq {
				t.Errorf("LookupKey(k%d) = %d, %v", seq, got, err)
			}
		}
		if _, err := tx.Entry(ctx, "a", 4); !errors.Is(err, storage.ErrNotFound) {
			t.Errorf("Entry(4) = %v, want ErrNotFound", err)
		}
	})
}

func testDuplicateKey(t *testing.T, b storage.Backend) {
	appendN(t, b, "a", 1, 1)
	err := update(t, b, func(tx storage.Tx) error {
		return tx.Append(ctx, "a", record(2, "k1"), head(2))
	})
	if !errors.Is(err, storage.ErrDuplicate) {
		t.Fatalf("second k1: %v, want ErrDuplicate", err)
	}
	view(t, b, func(tx storage.Tx) {
		if h, _ := tx.Head(ctx, "a"); h.Seq != 1 {
			t.Errorf("head seq %d after refused append, want 1", h.Seq)
		}
	})
	// An empty key is no key: many entries may have it.
	err = update(t, b, func(tx storage.Tx) error {
		if err := tx.Append(ctx, "a", record(2, ""), head(2)); err != nil {
			return err
		}
		return tx.Append(ctx, "a", record(3, ""), head(3))
	})
	if err != nil {
		t.Fatalf("entries without key: %v", err)
	}
}

func testWrongSeq(t *testing.T, b storage.Backend) {
	appendN(t, b, "a", 1, 2)
	for _, seq := range []uint64{1, 2, 4} {
		err := update(t, b, func(tx storage.Tx) error {
			return tx.Append(ctx, "a", record(seq, "x"), head(seq))
		})
		if err == nil {
			t.Errorf("append at seq %d after head 2 succeeded", seq)
		}
	}
	err := update(t, b, func(tx storage.Tx) error {
		return tx.Append(ctx, "new", record(2, ""), head(2))
	})
	if err == nil {
		t.Errorf("first entry of a chain at seq 2 succeeded")
	}
}

func testRollbackDiscards(t *testing.T, b storage.Backend) {
	appendN(t, b, "a", 1, 1)
	tx, err := b.Begin(ctx, true)
	if err != nil {
		t.Fatal(err)
	}
	if err := tx.Append(ctx, "a", record(2, "k2"), head(2)); err != nil {
		t.Fatal(err)
	}
	if err := tx.Append(ctx, "b", record(1, "k1"), head(1)); err != nil {
		t.Fatal(err)
	}
	if err := tx.StatePut(ctx, []byte("s"), []byte("v")); err != nil {
		t.Fatal(err)
	}
	if err := tx.Rollback(); err != nil {
		t.Fatal(err)
	}
	view(t, b, func(tx storage.Tx) {
		if h, _ := tx.Head(ctx, "a"); h.Seq != 1 {
			t.Errorf("head of a = %d after rollback", h.Seq)
		}
		if _, err := tx.Head(ctx, "b"); !errors.Is(err, storage.ErrNotFound) {
			t.Errorf("chain b exists after rollback: %v", err)
		}
		if _, err := tx.StateGet(ctx, []byte("s")); !errors.Is(err, storage.ErrNotFound) {
			t.Errorf("state survives rollback: %v", err)
		}
	})
	appendN(t, b, "a", 2, 2) // the seq freed by the rollback is usable
}

func testReadOwnWrites(t *testing.T, b storage.Backend) {
	err := update(t, b, func(tx storage.Tx) error {
		for seq := uint64(1); seq <= 3; seq++ {
			if err := tx.Append(ctx, "a", record(seq, fmt.Sprint(seq)), head(seq)); err != nil {
				return err
			}
			h, err := tx.Head(ctx, "a")
			if err != nil || h.Seq != seq {
				return fmt.Errorf("head after append %d: %v, %v", seq, h, err)
			}
			got, err := tx.LookupKey(ctx, "a", fmt.Sprint(seq))
			if err != nil || got != seq {
				return fmt.Errorf("lookup own key %d: %d, %v", seq, got, err)
			}
			if _, err := tx.Entry(ctx, "a", seq); err != nil {
				return fmt.Errorf("own entry %d: %v", seq, err)
			}
		}
		n := 0
		for _, err := range tx.Entries(ctx, "a", 1) {
			if err != nil {
				return err
			}
			n++
		}
		if n != 3 {
			return fmt.Errorf("entries in own tx: %d, want 3", n)
		}
		if err := tx.StatePut(ctx, []byte("k"), []byte("v")); err != nil {
			return err
		}
		if v, err := tx.StateGet(ctx, []byte("k")); err != nil || string(v) != "v" {
			return fmt.Errorf("own state: %q, %v", v, err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func testEntriesFrom(t *testing.T, b storage.Backend) {
	appendN(t, b, "a", 1, 10)
	appendN(t, b, "b", 1, 2)
	view(t, b, func(tx storage.Tx) {
		want := uint64(4)
		for rec, err := range tx.Entries(ctx, "a", 4) {
			if err != nil {
				t.Fatal(err)
			}
			if rec.Seq != want {
				t.Fatalf("seq %d, want %d", rec.Seq, want)
			}
			want++
		}
		if want != 11 {
			t.Errorf("iteration ended before seq %d", want)
		}
		n := 0
		for range tx.Entries(ctx, "a", 1) {
			if n++; n == 2 {
				break // stopping early must be safe
			}
		}
	})
}

func testChainsOrdered(t *testing.T, b storage.Backend) {
	names := []string{"b", "a", "c/x", "c", "ab"}
	for _, name := range names {
		appendN(t, b, name, 1, 1)
	}
	view(t, b, func(tx storage.Tx) {
		var got []string
		for ch, err := range tx.Chains(ctx, "") {
			if err != nil {
				t.Fatal(err)
			}
			if ch.Head != head(1) {
				t.Errorf("chain %s head %v", ch.Chain, ch.Head)
			}
			got = append(got, ch.Chain)
		}
		want := []string{"a", "ab", "b", "c", "c/x"}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("Chains = %v, want %v", got, want)
		}
		got = got[:0]
		for ch := range tx.Chains(ctx, "ab") {
			got = append(got, ch.Chain)
		}
		if fmt.Sprint(got) != fmt.Sprint(want[1:]) {
			t.Errorf("Chains from ab = %v", got)
		}
	})
}

func testKeysPerChain(t *testing.T, b storage.Backend) {
	err := update(t, b, func(tx storage.Tx) error {
		if err := tx.Append(ctx, "a", record(1, "same"), head(1)); err != nil {
			return err
		}
		return tx.Append(ctx, "b", record(1, "same"), head(1))
	})
	if err != nil {
		t.Fatalf("one key on two chains: %v", err)
	}
}

func testState(t *testing.T, b storage.Backend) {
	err := update(t, b, func(tx storage.Tx) error {
		if err := tx.StatePut(ctx, []byte("x"), []byte("1")); err != nil {
			return err
		}
		if err := tx.StatePut(ctx, []byte("x"), []byte("2")); err != nil {
			return err
		}
		if err := tx.StatePut(ctx, []byte("empty"), nil); err != nil {
			return err
		}
		return tx.StateDelete(ctx, []byte("missing"))
	})
	if err != nil {
		t.Fatal(err)
	}
	view(t, b, func(tx storage.Tx) {
		if v, err := tx.StateGet(ctx, []byte("x")); err != nil || string(v) != "2" {
			t.Errorf("x = %q, %v", v, err)
		}
		if v, err := tx.StateGet(ctx, []byte("empty")); err != nil || len(v) != 0 {
			t.Errorf("empty = %q, %v", v, err)
		}
	})
	if err := update(t, b, func(tx storage.Tx) error { return tx.StateDelete(ctx, []byte("x")) }); err != nil {
		t.Fatal(err)
	}
	view(t, b, func(tx storage.Tx) {
		if _, err := tx.StateGet(ctx, []byte("x")); !errors.Is(err, storage.ErrNotFound) {
			t.Errorf("deleted x: %v", err)
		}
	})
}

func testStateScanBounds(t *testing.T, b storage.Backend) {
	keys := []string{"a", "b/1", "b/2", "b/3", "c"}
	err := update(t, b, func(tx storage.Tx) error {
		for _, k := range keys {
			if err := tx.StatePut(ctx, []byte(k), []byte("v"+k)); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		start, end string
		noEnd      bool
		reverse    bool
		want       string
	}{
		{"b/", "b0", false, false, "[b/1 b/2 b/3]"},
		{"b/", "b0", false, true, "[b/3 b/2 b/1]"},
		{"b/2", "b/3", false, true, "[b/2]"},
		{"", "", true, false, "[a b/1 b/2 b/3 c]"},
		{"", "", true, true, "[c b/3 b/2 b/1 a]"},
		{"b/15", "z", false, true, "[c b/3 b/2]"},
		{"d", "", true, false, "[]"},
	}
	view(t, b, func(tx storage.Tx) {
		for _, c := range cases {
			var end []byte
			if !c.noEnd {
				end = []byte(c.end)
			}
			var got []string
			for kv, err := range tx.StateScan(ctx, []byte(c.start), end, c.reverse) {
				if err != nil {
					t.Fatal(err)
				}
				if string(kv.Value) != "v"+string(kv.Key) {
					t.Errorf("value of %s = %s", kv.Key, kv.Value)
				}
				got = append(got, string(kv.Key))
			}
			if fmt.Sprint(got) != c.want && !(c.want == "[]" && got == nil) {
				t.Errorf("scan %+v = %v, want %s", c, got, c.want)
			}
		}
	})
}

func testReadOnlyTx(t *testing.T, b storage.Backend) {
	tx, err := b.Begin(ctx, false)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	if tx.Writable() {
		t.Error("read-only tx says it is writable")
	}
	if err := tx.Append(ctx, "a", record(1, ""), head(1)); !errors.Is(err, storage.ErrReadOnly) {
		t.Errorf("Append in read-only tx: %v", err)
	}
	if err := tx.StatePut(ctx, []byte("k"), []byte("v")); !errors.Is(err, storage.ErrReadOnly) {
		t.Errorf("StatePut in read-only tx: %v", err)
	}
}

func testTxDone(t *testing.T, b storage.Backend) {
	tx, err := b.Begin(ctx, true)
	if err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); !errors.Is(err, storage.ErrTxDone) {
		t.Errorf("second Commit: %v", err)
	}
	if err := tx.Rollback(); err != nil {
		t.Errorf("Rollback after Commit: %v", err)
	}
	if _, err := tx.Head(ctx, "a"); !errors.Is(err, storage.ErrTxDone) {
		t.Errorf("Head after Commit: %v", err)
	}
}

func testStats(t *testing.T, b storage.Backend) {
	appendN(t, b, "a", 1, 100)
	s, err := b.Stats(ctx)
	if err != nil || s.SizeBytes <= 0 {
		t.Errorf("Stats = %+v, %v", s, err)
	}
}

// implementation returns v as the optional interface T, and skips the
// test when v does not implement it.
func implementation[T any](t testing.TB, v any) T {
	t.Helper()
	r, ok := v.(T)
	if !ok {
		t.Skipf("%T is not a %v", v, reflect.TypeFor[T]())
	}
	return r
}
