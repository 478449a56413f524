package segment

import (
	"errors"
	"testing"

	"github.com/ledgerworks/ledger/storage"
)

// FuzzDecodeSegment: the decoder never panics, every refusal wraps
// storage.ErrCorrupt, and a segment it accepts reads back to the same bytes
// when its entries are built again (unless an entry is refused, as damage).
func FuzzDecodeSegment(f *testing.F) {
	key, value := buildSegment(3, 9, []byte("one"), []byte("two"), []byte{})
	f.Add(key, value)
	key, value = buildSegment(1, 1, make([]byte, 100))
	f.Add(key, value)
	f.Fuzz(func(t *testing.T, key, value []byte) {
		s, err := Decode(key, value)
		if err != nil {
			if !errors.Is(err, storage.ErrCorrupt) {
				t.Fatalf("refusal %v does not wrap storage.ErrCorrupt", err)
			}
			return
		}
		b := &Builder{ChainID: 3}
		for i := range s.Count {
			e, err := s.Entry(i)
			if err != nil {
				if !errors.Is(err, storage.ErrCorrupt) {
					t.Fatalf("entry %d: %v does not wrap storage.ErrCorrupt", i, err)
				}
				return
			}
			b.Add(s.First+uint64(i), e)
		}
		if got := b.Encode(nil); string(got) != string(value) {
			t.Fatalf("re-encoded %x, stored %x", got, value)
		}
	})
}

// FuzzMappedEntry: the map's read of segment i > 0, which takes the
// segment's seqs from the map (one past the last seq of segment i-1), never
// panics on any stored bytes, and agrees with a descent's decode: what it
// reads is what Decode and SeqEntry read, and it reads every entry
// of a segment they accept whose first seq is where the map says.
func FuzzMappedEntry(f *testing.F) {
	_, value := buildSegment(3, 9, []byte("one"), []byte("two"), []byte{})
	f.Add(uint64(6), uint64(9), uint64(8), value)
	_, value = buildSegment(3, 100, make([]byte, 300), []byte("x"))
	f.Add(uint64(98), uint64(100), uint64(99), value)
	f.Add(uint64(97), uint64(100), uint64(99), value) // the map says three entries
	f.Fuzz(func(t *testing.T, previousLast, last, seq uint64, value []byte) {
		if previousLast >= seq || seq > last {
			return // not a segment the map's search returns for seq
		}
		x := &Index{lasts: []uint64{previousLast, last}, values: [][]byte{nil, value}}
		got, ok := x.MappedEntry(1, seq)
		s, err := Decode(Key(3, last), value)
		var want []byte
		if err == nil && seq >= s.First {
			want, err = s.SeqEntry(seq)
		}
		decoded := err == nil && seq >= s.First
		switch {
		case ok && (!decoded || s.First != previousLast+1 || string(got) != string(want)):
			t.Fatalf("mapped read %q of a segment the decode reads as %q from seq %d (%v)", got, want, s.First, err)
		case !ok && decoded && s.First == previousLast+1:
			t.Fatalf("mapped read refused entry %d of a sound segment from seq %d", seq, s.First)
		}
	})
}
