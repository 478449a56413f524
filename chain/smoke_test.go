package chain_test

import (
	"context"
	"errors"
	"path/filepath"
	"sync"
	"testing"

	"github.com/ledgerworks/ledger/chain"
)

func TestSmoke(t *testing.T) {
	ctx := context.Background()
	db, err := chain.Open(filepath.Join(t.TempDir(), "l.db"), chain.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	r1, err := db.Append(ctx, chain.Request{Chain: "a", IdempotencyKey: "k", Type: "t/v1", Payload: []byte("x")})
	if err != nil || r1.Replayed || r1.Entry.Seq != 1 {
		t.Fatalf("%+v %v", r1, err)
	}
	r2, err := db.Append(ctx, chain.Request{Chain: "a", IdempotencyKey: "k", Type: "t/v1", Payload: []byte("x")})
	if err != nil || !r2.Replayed || r2.Entry.Hash != r1.Entry.Hash {
		t.Fatalf("%+v %v", r2, err)
	}
	_, err = db.Append(ctx, chain.Request{Chain: "a", IdempotencyKey: "k", Type: "t/v1", Payload: []byte("y")})
	var ce *chain.ConflictError
	if !errors.Is(err, chain.ErrIdempotencyConflict) || !errors.As(err, &ce) || ce.ExistingSeq != 1 {
		t.Fatalf("conflict: %v", err)
	}
	var wg sync.WaitGroup
	for i := 0; i < 64; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := db.Append(ctx, chain.Request{Chain: "b", IdempotencyKey: "same", Type: "t/v1", Payload: []byte("z")}); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	h, err := db.Head(ctx, "b")
	if err != nil || h.Seq != 1 {
		t.Fatalf("head b %+v %v", h, err)
	}
	rep, err := verifyEachWay(t, db, ctx, chain.VerifyOptions{})
	if err != nil || !rep.OK() || rep.Entries != 2 || rep.Chains != 2 {
		t.Fatalf("verify %+v %v", rep, err)
	}
}
