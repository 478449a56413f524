package bolt

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
func seedOperations() []operation {
	head := storage.Head{Seq: 7, TimeUnixNano: -5}
	head.Hash[0], head.Hash[31] = 0xAA, 0x55
	return []operation{
		{kind: operationAppend, chain: "acme/stock/item-1", seq: 7, key: "op-1", head: head, data: []byte("payload")},
		{kind: operationAppend, chain: "b", seq: 1, head: storage.Head{Seq: 1}, data: []byte{}},
		{kind: operationStatePut, state: []byte("stock/acme/balance"), data: []byte("10")},
		{kind: operationStatePut, state: []byte("k"), data: []byte{}},
		{kind: operationStateDelete, state: []byte("stock/acme/old")},
	}
}

// FuzzDecodeCommit: the decoder never panics, accepts only what the
// encoder writes (a decoded record encodes back to the same bytes), and
// every refusal wraps storage.ErrCorrupt.
func FuzzDecodeCommit(f *testing.F) {
	f.Add(encodeCommit(nil, seedOperations()))
	f.Add(encodeCommit(nil, nil))
	f.Fuzz(func(t *testing.T, record []byte) {
		operations, err := decodeCommit(record)
		if err != nil {
			if !errors.Is(err, storage.ErrCorrupt) {
				t.Fatalf("refusal %v does not wrap storage.ErrCorrupt", err)
			}
			return
		}
		if again := encodeCommit(nil, operations); !bytes.Equal(again, record) {
			t.Fatalf("decoded record encodes to %x, want %x", again, record)
		}
		checkAliased(t, record, operations)
	})
}

// checkAliased encodes a copy of operations (decoded from record) with
// encodeCommitAliased: the record must be the same bytes and the copy's
// slices must equal the decoded ones and point into the new record, as
// the memory table is given them instead of a second decode.
func checkAliased(t *testing.T, record []byte, decoded []operation) {
	t.Helper()
	operations := make([]operation, len(decoded))
	for i, o := range decoded {
		o.data, o.state = bytes.Clone(o.data), bytes.Clone(o.state)
		operations[i] = o
	}
	aliased := encodeCommitAliased(make([]byte, 0, len(record)), operations)
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
		if got.kind != want.kind || got.chain != want.chain || got.seq != want.seq || got.key != want.key ||
			got.head != want.head || !bytes.Equal(got.data, want.data) || !bytes.Equal(got.state, want.state) ||
			(got.data == nil) != (want.data == nil) || (got.state == nil) != (want.state == nil) {
			t.Fatalf("operation %d after the aliased encoding: %+v, want %+v", i, got, want)
		}
		if !inside(got.data) || !inside(got.state) || cap(got.data) != len(got.data) || cap(got.state) != len(got.state) {
			t.Fatalf("operation %d: data or state does not point into the record alone", i)
		}
	}
}

func TestEncodeCommitAliased(t *testing.T) {
	record := encodeCommit(nil, seedOperations())
	decoded, err := decodeCommit(record)
	if err != nil {
		t.Fatal(err)
	}
	checkAliased(t, record, decoded)
	// The aliased operations are the record: a change of the record's
	// bytes is a change of what the memory table holds.
	operations := seedOperations()
	aliased := encodeCommitAliased(nil, operations)
	aliased[len(aliased)-len("stock/acme/old")] = 'X'
	if string(operations[4].state) != "Xtock/acme/old" {
		t.Fatalf("state key %q does not point into the record", operations[4].state)
	}
}

func TestCommitRecordRoundTrip(t *testing.T) {
	record := encodeCommit(nil, seedOperations())
	operations, err := decodeCommit(record)
	if err != nil {
		t.Fatal(err)
	}
	want := seedOperations()
	if len(operations) != len(want) {
		t.Fatalf("%d operations, want %d", len(operations), len(want))
	}
	for i := range want {
		got, w := operations[i], want[i]
		if got.kind != w.kind || got.chain != w.chain || got.seq != w.seq || got.key != w.key ||
			!bytes.Equal(got.data, w.data) || !bytes.Equal(got.state, w.state) {
			t.Errorf("operation %d: %+v, want %+v", i, got, w)
		}
		if w.kind == operationAppend && got.head != w.head {
			t.Errorf("operation %d: head %+v, want %+v", i, got.head, w.head)
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
		if _, err := decodeCommit(damaged); !errors.Is(err, storage.ErrCorrupt) {
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
