package chain

import (
	"context"
	"reflect"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/ledgerworks/ledger/storage/storagetest"
)

// TestValidateTextFastPathAgrees checks that validateText, which takes
// printable ASCII eight bytes at a time, answers every string as the
// rune-by-rune check does: the same nil, or the same error.
func TestValidateTextFastPathAgrees(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		var s string
		if rapid.Bool().Draw(t, "ascii") {
			s = string(rapid.SliceOfN(rapid.ByteRange(0x1e, 0x80), 0, 40).Draw(t, "ascii bytes"))
		} else {
			s = string(rapid.SliceOfN(rapid.Byte(), 0, 40).Draw(t, "bytes"))
		}
		lengthMin := rapid.IntRange(0, 2).Draw(t, "min")
		lengthMax := rapid.IntRange(lengthMin, 45).Draw(t, "max")
		got := validateText("f", s, lengthMin, lengthMax, ErrInvalidKey)
		want := validateTextRunes("f", s, lengthMin, lengthMax, ErrInvalidKey)
		if (got == nil) != (want == nil) || got != nil && got.Error() != want.Error() {
			t.Fatalf("validateText(%q, %d, %d) = %v, rune by rune %v", s, lengthMin, lengthMax, got, want)
		}
	})
}

// TestAppendEntryOwnsItsPayload checks that the entry Append returns holds
// a payload of its own: the caller's buffer and the returned payload may be
// changed (or appended to) inside the transaction without reaching the
// stored entry, which reads back and verifies as appended. An empty payload
// is nil, as a stored one reads back.
func TestAppendEntryOwnsItsPayload(t *testing.T) {
	ctx := context.Background()
	for _, f := range storagetest.Factories(t) {
		t.Run(f.Name, func(t *testing.T) {
			clock := time.Unix(1_764_000_000, 0)
			db, err := OpenBackend(f.Open(t), Options{Clock: func() time.Time { clock = clock.Add(time.Millisecond); return clock }})
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			var results []Result
			err = db.Update(ctx, func(tx *Tx) error {
				results = results[:0]
				for i, payload := range [][]byte{[]byte("first payload"), nil, {}, []byte("x")} {
					buf := append(make([]byte, 0, 64), payload...)
					res, err := tx.Append(Request{Chain: "c", IdempotencyKey: string(rune('a' + i)), Type: "t/v1", Payload: buf})
					if err != nil {
						return err
					}
					if len(payload) == 0 && res.Entry.Payload != nil {
						t.Errorf("entry %d: empty payload %#v, want nil", i, res.Entry.Payload)
					}
					want := append([]byte(nil), res.Entry.Payload...)
					for j := range buf {
						buf[j] = '!'
					}
					for j := range res.Entry.Payload {
						res.Entry.Payload[j] = '?'
					}
					_ = append(res.Entry.Payload, "spilled"...)
					res.Entry.Payload = want
					results = append(results, res)
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			for _, res := range results {
				got, err := db.Get(ctx, "c", res.Entry.Seq)
				if err != nil {
					t.Fatal(err)
				}
				if !reflect.DeepEqual(got, res.Entry) {
					t.Fatalf("seq %d reads back as %+v, appended %+v", res.Entry.Seq, got, res.Entry)
				}
				if got.Hash != got.ComputeHash() {
					t.Fatalf("seq %d: stored hash does not match its fields", got.Seq)
				}
			}
			report, err := db.Verify(ctx, VerifyOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if len(report.Failures) != 0 {
				t.Fatalf("verify: %+v", report.Failures)
			}
		})
	}
}
