package chain_test

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/ledgerworks/ledger/chain"
)

func sampleEntry() chain.Entry {
	e := chain.Entry{Chain: "acme/stock/SKU-1", Seq: 3, PrevHash: chain.Genesis("x"), TimeUnixNano: 1_764_000_000_123_456_789,
		IdempotencyKey: "receipt-42", Type: "stock.movement/v1", Payload: []byte(`{"qty":"10"}`)}
	e.Hash = e.ComputeHash()
	return e
}

func TestHashTextRoundTrip(t *testing.T) {
	h := chain.Genesis("c")
	s := h.String()
	if len(s) != 64 || strings.ToLower(s) != s {
		t.Fatalf("String %q", s)
	}
	back, err := chain.ParseHash(s)
	if err != nil || back != h {
		t.Fatalf("ParseHash(%q) = %v %v", s, back, err)
	}
	if up, err := chain.ParseHash(strings.ToUpper(s)); err != nil || up != h {
		t.Fatalf("ParseHash upper case: %v %v", up, err)
	}
	for _, bad := range []string{"", s[:63], s + "0", "zz" + s[2:], s[:62] + " 0"} {
		if _, err := chain.ParseHash(bad); err == nil {
			t.Errorf("ParseHash(%q) accepted", bad)
		}
	}
}

func TestHashesSeparateTheirInputs(t *testing.T) {
	// Each function hashes length-prefixed fields under its own domain, so
	// moving bytes between fields or between functions changes the hash.
	if chain.Genesis("a") == chain.Genesis("b") || chain.Genesis("") == chain.Genesis("\x00") {
		t.Fatal("genesis collides")
	}
	if chain.Fingerprint("ab", []byte("c")) == chain.Fingerprint("a", []byte("bc")) {
		t.Fatal("fingerprint does not separate type from payload")
	}
	if chain.Fingerprint("t", nil) != chain.Fingerprint("t", []byte{}) {
		t.Fatal("nil and empty payloads differ")
	}
	base := sampleEntry()
	edits := map[string]func(e *chain.Entry){
		"chain":    func(e *chain.Entry) { e.Chain += "x" },
		"seq":      func(e *chain.Entry) { e.Seq++ },
		"prev":     func(e *chain.Entry) { e.PrevHash[31] ^= 1 },
		"time":     func(e *chain.Entry) { e.TimeUnixNano++ },
		"key":      func(e *chain.Entry) { e.IdempotencyKey = "" },
		"type":     func(e *chain.Entry) { e.Type += "x" },
		"payload":  func(e *chain.Entry) { e.Payload = append(e.Payload, 0) },
		"key→type": func(e *chain.Entry) { e.Type = e.IdempotencyKey + e.Type; e.IdempotencyKey = "" },
	}
	for name, edit := range edits {
		e := base
		e.Payload = bytes.Clone(base.Payload)
		edit(&e)
		if e.ComputeHash() == base.Hash {
			t.Errorf("changing %s keeps the hash", name)
		}
	}
	e := base
	e.Hash = chain.Hash{}
	if e.ComputeHash() != base.Hash {
		t.Fatal("the stored hash field takes part in the hash")
	}
	if base.Fingerprint() != chain.Fingerprint(base.Type, base.Payload) {
		t.Fatal("Entry.Fingerprint differs from Fingerprint")
	}
	if h := base.Head(); h != (chain.Head{Chain: base.Chain, Seq: base.Seq, Hash: base.Hash, TimeUnixNano: base.TimeUnixNano}) {
		t.Fatalf("Head %+v", h)
	}
}

func TestRecordRoundTrip(t *testing.T) {
	for _, e := range []chain.Entry{
		sampleEntry(),
		{Chain: "c", Seq: 1, Type: "t", TimeUnixNano: -1},
		{Chain: "c", Seq: 1 << 63, Type: strings.Repeat("t", chain.TypeLengthMax),
			IdempotencyKey: strings.Repeat("ключ", 32), Payload: bytes.Repeat([]byte{0, 0xff}, 5000)},
	} {
		rec := chain.EncodeRecord(&e)
		got, err := chain.DecodeRecord(e.Chain, e.Seq, rec)
		if err != nil {
			t.Fatalf("decode: %v", err)
		}
		if got.Payload == nil {
			got.Payload = e.Payload
		}
		if !equalEntries(got, e) {
			t.Fatalf("round trip\n got  %+v\n want %+v", got, e)
		}
		if again := chain.EncodeRecord(&got); !bytes.Equal(again, rec) {
			t.Fatal("re-encoding differs")
		}
		rec[len(rec)-1] ^= 0xff // the decoded entry does not alias the record
		if len(got.Payload) > 0 && got.Payload[len(got.Payload)-1] != e.Payload[len(e.Payload)-1] {
			t.Fatal("decoded payload aliases the record")
		}
	}
}

func equalEntries(a, b chain.Entry) bool {
	return a.Chain == b.Chain && a.Seq == b.Seq && a.PrevHash == b.PrevHash && a.TimeUnixNano == b.TimeUnixNano &&
		a.IdempotencyKey == b.IdempotencyKey && a.Type == b.Type && bytes.Equal(a.Payload, b.Payload) && a.Hash == b.Hash
}

func TestDecodeRecordRefusesMalformedRecords(t *testing.T) {
	e := sampleEntry()
	good := chain.EncodeRecord(&e)
	fixed := 1 + 8 + 32 + 32
	mutate := func(edit func(b []byte) []byte) []byte { return edit(bytes.Clone(good)) }
	cases := map[string][]byte{
		"empty":                nil,
		"one byte short":       good[:len(good)-1],
		"fixed part only":      good[:fixed],
		"cut in a length":      good[:fixed+2],
		"trailing byte":        append(bytes.Clone(good), 0),
		"version 0":            mutate(func(b []byte) []byte { b[0] = 0; return b }),
		"version 2":            mutate(func(b []byte) []byte { b[0] = 2; return b }),
		"key length too large": mutate(func(b []byte) []byte { b[fixed] = 0xff; return b }),
		"key length past end": mutate(func(b []byte) []byte {
			b[fixed+3] = byte(len(e.IdempotencyKey) + 20)
			return b
		}),
		"empty type": chain.EncodeRecord(&chain.Entry{Chain: "c", Seq: 1}),
		"type too long": chain.EncodeRecord(&chain.Entry{Chain: "c", Seq: 1,
			Type: strings.Repeat("t", chain.TypeLengthMax+1)}),
		"key with control character": chain.EncodeRecord(&chain.Entry{Chain: "c", Seq: 1, Type: "t", IdempotencyKey: "a\nb"}),
		"type not UTF-8":             chain.EncodeRecord(&chain.Entry{Chain: "c", Seq: 1, Type: "\xff"}),
	}
	for name, data := range cases {
		_, err := chain.DecodeRecord("the-chain", 9, data)
		var decodeErr *chain.DecodeError
		if !errors.Is(err, chain.ErrCorrupt) || !errors.As(err, &decodeErr) {
			t.Errorf("%s: %v, want a *DecodeError matching ErrCorrupt", name, err)
			continue
		}
		if decodeErr.Chain != "the-chain" || decodeErr.Seq != 9 || decodeErr.Reason == "" {
			t.Errorf("%s: %+v", name, decodeErr)
		}
	}
}

func TestErrorMessagesNameWhatFailed(t *testing.T) {
	invalid := chain.ValidateRequest(chain.Request{Chain: "c", Type: strings.Repeat("t", 65)}, 0)
	if !strings.Contains(invalid.Error(), "65") || !strings.Contains(invalid.Error(), "type") {
		t.Errorf("invalid: %v", invalid)
	}
	conflict := &chain.ConflictError{Chain: "c", IdempotencyKey: "k", ExistingSeq: 4}
	if msg := conflict.Error(); !strings.Contains(msg, `"c"`) || !strings.Contains(msg, `"k"`) || !strings.Contains(msg, "4") {
		t.Errorf("conflict: %v", msg)
	}
	decodeErr := &chain.DecodeError{Chain: "c", Seq: 5, Reason: "cut"}
	if msg := decodeErr.Error(); !strings.Contains(msg, "5") || !strings.Contains(msg, "cut") {
		t.Errorf("decode: %v", msg)
	}
	report := chain.Report{Failures: []chain.Failure{{Chain: "c", Seq: 2, Reason: chain.ReasonSeqGap, Detail: "d"}}}
	err := report.Err()
	var verification *chain.VerificationError
	if !errors.Is(err, chain.ErrVerification) || !errors.As(err, &verification) || len(verification.Failures) != 1 ||
		!strings.Contains(err.Error(), "seq_gap") {
		t.Errorf("verification: %v", err)
	}
	if s := report.Failures[0].String(); !strings.Contains(s, "seq 2") || !strings.Contains(s, "seq_gap") {
		t.Errorf("failure: %s", s)
	}
	if (&chain.Report{}).Err() != nil || !(&chain.Report{}).OK() {
		t.Error("an empty report is not OK")
	}
}
