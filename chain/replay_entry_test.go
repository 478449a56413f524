package chain_test

import (
	"bytes"
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/ledgerworks/ledger/chain"
)

// A replay answers with the entry exactly as Get decodes it, whether the
// retry matches the stored request (built from the request's key and type)
// or not (decoded in full), on every backend; its payload is its own copy.
func TestReplayEntryEqualsStoredEntry(t *testing.T) {
	forEachBackend(t, chain.Options{Clock: testClock()}, func(t *testing.T, db *chain.DB) {
		ctx := context.Background()
		requests := []chain.Request{
			{Chain: "c", IdempotencyKey: "k-empty", Type: "t/v1"},
			{Chain: "c", IdempotencyKey: "k-bytes", Type: "t/v1", Payload: []byte{0, 1, 2, 0xff}},
			{Chain: "c", IdempotencyKey: "clé-ü", Type: "typ-ß/v1", Payload: []byte("ünïcödé")},
			{Chain: "c", IdempotencyKey: strings.Repeat("k", chain.IdempotencyKeyLengthMax), Type: "t/v1",
				Payload: bytes.Repeat([]byte{7}, 64<<10)},
		}
		for _, req := range requests {
			original := mustAppend(t, db, req)
			stored, err := db.Get(ctx, req.Chain, original.Entry.Seq)
			if err != nil {
				t.Fatal(err)
			}
			retry := req
			retry.Payload = bytes.Clone(req.Payload)
			res, err := db.Append(ctx, retry)
			if err != nil || !res.Replayed {
				t.Fatalf("retry of %q: %+v %v", req.IdempotencyKey, res, err)
			}
			if !reflect.DeepEqual(res.Entry, stored) || !reflect.DeepEqual(res.Entry, original.Entry) {
				t.Fatalf("replayed entry\n%+v\nstored\n%+v", res.Entry, stored)
			}
			if len(retry.Payload) > 0 {
				retry.Payload[0] ^= 1 // the caller's bytes are not the entry's
				if res.Entry.Payload[0] == retry.Payload[0] {
					t.Fatal("the replayed entry's payload aliases the request's")
				}
			}
			err = db.View(ctx, func(tx *chain.Tx) error {
				res, found, err := tx.Replay(req)
				if err != nil || !found || !reflect.DeepEqual(res.Entry, stored) {
					t.Fatalf("Replay in View: %+v %v %v", res, found, err)
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
		}
		conflict := requests[1]
		conflict.Payload = []byte{9}
		var ce *chain.ConflictError
		if _, err := db.Append(ctx, conflict); !errors.As(err, &ce) || ce.ExistingSeq != 2 {
			t.Fatalf("conflicting retry: %v", err)
		}
		other := requests[1]
		other.Type = "t/v2"
		if _, err := db.Append(ctx, other); !errors.Is(err, chain.ErrIdempotencyConflict) {
			t.Fatalf("retry with another type: %v", err)
		}
	})
}
