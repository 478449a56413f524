package segment

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"testing"

	"github.com/ledgerworks/ledger/storage"
)

// buildSegment encodes entries as the chain's segment ending at last.
func buildSegment(chainID, last uint64, entries ...[]byte) (key, value []byte) {
	b := &Builder{ChainID: chainID}
	for i, e := range entries {
		b.Add(last-uint64(len(entries))+1+uint64(i), e)
	}
	return Key(chainID, last), b.Encode(nil)
}

// TestSegmentRoundTrip: every entry a builder takes reads back at its seq,
// empty ones included.
func TestSegmentRoundTrip(t *testing.T) {
	entries := [][]byte{[]byte("first"), {}, bytes.Repeat([]byte("x"), 300), []byte("last")}
	key, value := buildSegment(7, 40, entries...)
	s, err := Decode(key, value)
	if err != nil {
		t.Fatal(err)
	}
	if s.First != 37 || s.Last != 40 || s.Count != 4 {
		t.Fatalf("segment seqs %d..%d count %d, want 37..40 count 4", s.First, s.Last, s.Count)
	}
	for i, want := range entries {
		got, err := s.SeqEntry(37 + uint64(i))
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("seq %d: %q, %v; want %q", 37+i, got, err, want)
		}
	}
}

// TestSegmentDamageIsCorrupt: a header that does not fit its value or its
// key is refused with storage.ErrCorrupt, and so is an entry whose offsets
// run backwards.
func TestSegmentDamageIsCorrupt(t *testing.T) {
	key, value := buildSegment(1, 3, []byte("aa"), []byte("bbb"), []byte("c"))
	damaged := map[string]func() ([]byte, []byte){
		"short key":   func() ([]byte, []byte) { return key[:15], value },
		"no count":    func() ([]byte, []byte) { return key, value[:3] },
		"zero count":  func() ([]byte, []byte) { v := bytes.Clone(value); binary.BigEndian.PutUint32(v, 0); return key, v },
		"count > seq": func() ([]byte, []byte) { return Key(1, 2), value },
		"count past value": func() ([]byte, []byte) {
			v := bytes.Clone(value)
			binary.BigEndian.PutUint32(v, 1000)
			return key, v
		},
		"truncated":   func() ([]byte, []byte) { return key, value[:len(value)-1] },
		"extra bytes": func() ([]byte, []byte) { return key, append(bytes.Clone(value), 0) },
	}
	for name, damage := range damaged {
		k, v := damage()
		if _, err := Decode(k, v); !errors.Is(err, storage.ErrCorrupt) {
			t.Errorf("%s: %v; want storage.ErrCorrupt", name, err)
		}
	}
	v := bytes.Clone(value)
	binary.BigEndian.PutUint32(v[4:], 4) // entry 0 runs 0..4, entry 1 4..3
	binary.BigEndian.PutUint32(v[8:], 3)
	s, err := Decode(key, v)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Entry(1); !errors.Is(err, storage.ErrCorrupt) {
		t.Fatalf("entry with offsets 4..3: %v; want storage.ErrCorrupt", err)
	}
}

// TestSegmentBuilderSeals: a builder takes entries up to SegmentBytesMax,
// and always takes one into an empty segment.
func TestSegmentBuilderSeals(t *testing.T) {
	b := &Builder{ChainID: 1}
	entry := bytes.Repeat([]byte("e"), 326)
	for seq := uint64(1); b.Fits(len(entry)); seq++ {
		b.Add(seq, entry)
	}
	size := len(b.Encode(nil))
	if size > BytesMax || size+OffsetSize+len(entry) <= BytesMax {
		t.Fatalf("sealed at %d bytes with %d entries; SegmentBytesMax %d", size, len(b.ends), BytesMax)
	}
	b.Reset()
	if huge := make([]byte, 2*BytesMax); !b.Fits(len(huge)) {
		t.Fatal("an empty segment refuses an entry larger than SegmentBytesMax")
	}
	if got := fmt.Sprint(BytesMax); got != "16344" {
		t.Fatalf("SegmentBytesMax %s: two segments no longer fill eight 4 KiB pages", got)
	}
}
