package bolt

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
		s, err := decodeSegment(key, value)
		if err != nil {
			if !errors.Is(err, storage.ErrCorrupt) {
				t.Fatalf("refusal %v does not wrap storage.ErrCorrupt", err)
			}
			return
		}
		b := &segmentBuilder{chainID: 3}
		for i := range s.count {
			e, err := s.entry(i)
			if err != nil {
				if !errors.Is(err, storage.ErrCorrupt) {
					t.Fatalf("entry %d: %v does not wrap storage.ErrCorrupt", i, err)
				}
				return
			}
			b.add(s.first+uint64(i), e)
		}
		if got := b.encode(nil); string(got) != string(value) {
			t.Fatalf("re-encoded %x, stored %x", got, value)
		}
	})
}
