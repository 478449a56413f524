package keyindex

import "testing"

// TestNewFilterWithinBudget checks that a filter built under a budget,
// with its seq map, takes what FilterBytesFor says and, when the budget
// holds a filter for the keys there are, stays within it; without a bound
// it is sized as before (FilterGrowth times the keys, the map up to
// SeqMapBytesMax).
func TestNewFilterWithinBudget(t *testing.T) {
	const keys = 200_000
	for _, b := range []FilterBudget{
		{SeqMapBytesMax: SeqMapBytesMaxDefault, BytesMax: -1},
		{SeqMapBytesMax: SeqMapBytesMaxDefault, BytesMax: 16 << 20},
		{SeqMapBytesMax: SeqMapBytesMaxDefault, BytesMax: 2 << 20},
		{SeqMapBytesMax: SeqMapBytesMaxDefault, BytesMax: 64 << 10},
		{SeqMapBytesMax: SeqMapBytesMaxDefault, BytesMax: 4 << 10},
		{SeqMapBytesMax: SeqMapBytesMaxDefault, BytesMax: 32},
		{SeqMapBytesMax: -1, BytesMax: 2 << 20},
	} {
		f := NewFilter(keys, b)
		if got, want := f.Bytes(), FilterBytesFor(keys, b); got != want {
			t.Errorf("%+v: filter of %d bytes, FilterBytesFor says %d", b, got, want)
		}
		if f.Full() {
			t.Errorf("%+v: a new filter is full", b)
		}
		switch {
		case b.BytesMax < 0:
			if f.Capacity() != keys*FilterGrowth || f.Seqs == nil {
				t.Errorf("%+v: capacity %d, seq map %v; want %d and a map", b, f.Capacity(), f.Seqs != nil, keys*FilterGrowth)
			}
		case filterBytes(keys) <= b.BytesMax:
			if f.Bytes() > b.BytesMax {
				t.Errorf("%+v: filter and map of %d bytes", b, f.Bytes())
			}
		case b.BytesMax < FilterBlockWords*8:
			if f.Seqs != nil || len(f.Words) != FilterBlockWords {
				t.Errorf("%+v: %d words and a map %v, want one block and no map", b, len(f.Words), f.Seqs != nil)
			}
		default:
			// Too small for the keys: as large as fits, more false
			// positives, no map.
			if f.Seqs != nil || f.Bytes() > b.BytesMax || f.Bytes() <= b.BytesMax/2 {
				t.Errorf("%+v: filter of %d bytes and a map %v, want the most that fits and no map", b, f.Bytes(), f.Seqs != nil)
			}
			// A rebuild could not make it larger: it is never full.
			f.Built(keys*100, 1)
			if f.Full() {
				t.Errorf("%+v: a filter as large as fits is full at %d keys", b, f.Count())
			}
		}
		if b.SeqMapBytesMax < 0 && f.Seqs != nil {
			t.Errorf("%+v: a seq map", b)
		}
	}
}
