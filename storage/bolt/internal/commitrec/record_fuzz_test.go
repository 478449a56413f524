package commitrec

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"unsafe"

	"github.com/ledgerworks/ledger/storage"
)

// seedOperations is a commit of every kind of operation, the seed the
// corpus variations start from.
func seedOperations() []Operation {
	head := storage.Head{Seq: 7, TimeUnixNano: -5}
	head.Hash[0], head.Hash[31] = 0xAA, 0x55
	return []Operation{
		{Kind: KindAppend, Chain: "acme/stock/item-1", Seq: 7, Key: "op-1", Head: head, Data: []byte("payload")},
		{Kind: KindAppend, Chain: "b", Seq: 1, Head: storage.Head{Seq: 1}, Data: []byte{}},
		{Kind: KindStatePut, State: []byte("stock/acme/balance"), Data: []byte("10")},
		{Kind: KindStatePut, State: []byte("k"), Data: []byte{}},
		{Kind: KindStateDelete, State: []byte("stock/acme/old")},
	}
}

// FuzzDecodeCommit: the decoder never panics, accepts only what the
// encoder writes (a decoded record encodes back to the same bytes), and
// every refusal wraps storage.ErrCorrupt.
func FuzzDecodeCommit(f *testing.F) {
	f.Add(Encode(nil, seedOperations()))
	f.Add(Encode(nil, nil))
	f.Fuzz(func(t *testing.T, record []byte) {
		operations, err := Decode(record)
		if err != nil {
			if !errors.Is(err, storage.ErrCorrupt) {
				t.Fatalf("refusal %v does not wrap storage.ErrCorrupt", err)
			}
			return
		}
		if again := Encode(nil, operations); !bytes.Equal(again, record) {
			t.Fatalf("decoded record encodes to %x, want %x", again, record)
		}
		checkAliased(t, record, operations)
	})
}

// checkAliased encodes a copy of operations (decoded from record) with
// encodeCommitAliased: the record must be the same bytes and the copy's
// slices must equal the decoded ones and point into the new record, as
// the memory table is given them instead of a second decode.
func checkAliased(t *testing.T, record []byte, decoded []Operation) {
	t.Helper()
	operations := make([]Operation, len(decoded))
	for i, o := range decoded {
		o.Data, o.State = bytes.Clone(o.Data), bytes.Clone(o.State)
		operations[i] = o
	}
	aliased := EncodeAliased(make([]byte, 0, len(record)), operations)
	if !bytes.Equal(aliased, record) {
		t.Fatalf("aliased encoding %x, want %x", aliased, record)
	}
	inside := func(b []byte) bool {
		if len(b) == 0 {
			return cap(b) == 0 || len(aliased) > 0
		}
		start := uintptr(unsafe.Pointer(unsafe.SliceData(aliased)))
		p := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
		return p >= start && p+uintptr(cap(b)) <= start+uintptr(len(aliased))
	}
	for i := range decoded {
		got, want := operations[i], decoded[i]
		if got.Kind != want.Kind || got.Chain != want.Chain || got.Seq != want.Seq || got.Key != want.Key ||
			got.Head != want.Head || !bytes.Equal(got.Data, want.Data) || !bytes.Equal(got.State, want.State) ||
			(got.Data == nil) != (want.Data == nil) || (got.State == nil) != (want.State == nil) {
			t.Fatalf("operation %d after the aliased encoding: %+v, want %+v", i, got, want)
		}
		if !inside(got.Data) || !inside(got.State) || cap(got.Data) != len(got.Data) || cap(got.State) != len(got.State) {
			t.Fatalf("operation %d: data or state does not point into the record alone", i)
		}
	}
}

func TestEncodeCommitAliased(t *testing.T) {
	record := Encode(nil, seedOperations())
	decoded, err := Decode(record)
	if err != nil {
		t.Fatal(err)
	}
	checkAliased(t, record, decoded)
	// The aliased operations are the record: a change of the record's
	// bytes is a change of what the memory table holds.
	operations := seedOperations()
	aliased := EncodeAliased(nil, operations)
	aliased[len(aliased)-len("stock/acme/old")] = 'X'
	if string(operations[4].State) != "Xtock/acme/old" {
		t.Fatalf("state key %q does not point into the record", operations[4].State)
	}
}

func TestCommitRecordRoundTrip(t *testing.T) {
	record := Encode(nil, seedOperations())
	operations, err := Decode(record)
	if err != nil {
		t.Fatal(err)
	}
	want := seedOperations()
	if len(operations) != len(want) {
		t.Fatalf("%d operations, want %d", len(operations), len(want))
	}
	for i := range want {
		got, w := operations[i], want[i]
		if got.Kind != w.Kind || got.Chain != w.Chain || got.Seq != w.Seq || got.Key != w.Key ||
			!bytes.Equal(got.Data, w.Data) || !bytes.Equal(got.State, w.State) {
			t.Errorf("operation %d: %+v, want %+v", i, got, w)
		}
		if w.Kind == KindAppend && got.Head != w.Head {
			t.Errorf("operation %d: head %+v, want %+v", i, got.Head, w.Head)
		}
	}
	for _, damaged := range [][]byte{
		nil,
		{2, 0, 0, 0, 0},                   // unknown version
		record[:len(record)-1],            // cut short
		append(bytes.Clone(record), 0),    // a byte after the last operation
		{1, 0, 0, 0, 1, 9, 0, 1, 'k'},     // unknown operation kind
		{1, 0xff, 0xff, 0xff, 0xff},       // more operations than bytes
		{1, 0, 0, 0, 1, 3, 0, 0},          // empty state key
		{1, 0, 0, 0, 1, 1, 0, 0, 0, 0, 0}, // empty chain name, cut short
	} {
		if _, err := Decode(damaged); !errors.Is(err, storage.ErrCorrupt) {
			t.Errorf("decode of %x: %v, want storage.ErrCorrupt", damaged, err)
		}
	}
}

func TestFuzzDecodeCommitSeedsCommitted(t *testing.T) {
	seeds, err := filepath.Glob(filepath.Join("testdata", "fuzz", "FuzzDecodeCommit", "*"))
	if err != nil || len(seeds) < 6 {
		t.Fatalf("%d committed seeds for FuzzDecodeCommit (%v), want at least 6", len(seeds), err)
	}
	for _, seed := range seeds {
		if data, err := os.ReadFile(seed); err != nil || !bytes.HasPrefix(data, []byte("go test fuzz v1\n")) {
			t.Errorf("seed %s: %v", seed, err)
		}
	}
}
