package chain_test

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/ledgerworks/ledger/chain"
)

func TestAppendEntryCopiesAChain(t *testing.T) {
	ctx := context.Background()
	clock := time.Unix(1_764_000_000, 0)
	src, err := chain.Open(filepath.Join(t.TempDir(), "src.db"), chain.Options{Clock: func() time.Time { return clock }})
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	for i, key := range []string{"a", "", "b"} {
		clock = clock.Add(time.Duration(i) * time.Second)
		if _, err := src.Append(ctx, chain.Request{Chain: "c", IdempotencyKey: key, Type: "t/v1", Payload: []byte{byte(i)}}); err != nil {
			t.Fatal(err)
		}
	}
	var entries []chain.Entry
	for e, err := range src.Entries(ctx, "c", 1) {
		if err != nil {
			t.Fatal(err)
		}
		entries = append(entries, e)
	}
	dst, err := chain.Open(filepath.Join(t.TempDir(), "dst.db"), chain.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer dst.Close()

	// Out of order, tampered and duplicate-key entries are refused with nothing written.
	bad := entries[0]
	bad.Payload = []byte("changed")
	refusals := []struct {
		name  string
		entry chain.Entry
		want  error
	}{
		{"seq 2 first", entries[1], chain.ErrInvalidEntry},
		{"tampered", bad, chain.ErrInvalidEntry},
	}
	for _, r := range refusals {
		err := dst.Update(ctx, func(tx *chain.Tx) error { return tx.AppendEntry(r.entry) })
		if !errors.Is(err, r.want) || !errors.Is(err, chain.ErrInvalid) {
			t.Errorf("%s: %v, want %v", r.name, err, r.want)
		}
	}
	if _, err := dst.Head(ctx, "c"); !errors.Is(err, chain.ErrNotFound) {
		t.Fatalf("refused entries left a chain behind: %v", err)
	}

	err = dst.Update(ctx, func(tx *chain.Tx) error {
		for _, e := range entries {
			if err := tx.AppendEntry(e); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range entries {
		got, err := dst.Get(ctx, "c", want.Seq)
		if err != nil || got.Hash != want.Hash || got.TimeUnixNano != want.TimeUnixNano {
			t.Errorf("seq %d: %+v, %v; want %+v", want.Seq, got, err, want)
		}
	}
	// The copied key index answers replays.
	res, err := dst.Append(ctx, chain.Request{Chain: "c", IdempotencyKey: "b", Type: "t/v1", Payload: []byte{2}})
	if err != nil || !res.Replayed || res.Entry.Seq != 3 {
		t.Errorf("replay on imported chain: %+v, %v", res, err)
	}
	rep, err := verifyEachWay(t, dst, ctx, chain.VerifyOptions{})
	if err != nil || !rep.OK() {
		t.Errorf("verify: %+v, %v", rep, err)
	}
}
