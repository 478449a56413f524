package pgcolumn

import (
	"bytes"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgtype"
)

// encode is what pgx sends for v as a binary parameter of type oid.
func encode(t *testing.T, m *pgtype.Map, oid uint32, v any) []byte {
	t.Helper()
	b, err := m.Encode(oid, pgtype.BinaryFormatCode, v, nil)
	if err != nil {
		t.Fatalf("encode %T as %d: %v", v, oid, err)
	}
	return b
}

// TestSameBytes: every type sends what pgx sends for the plain Go value,
// NULLs, empty and nil arrays included.
func TestSameBytes(t *testing.T) {
	m := pgtype.NewMap()
	at := time.Date(2026, 12, 8, 1, 2, 3, 456789000, time.FixedZone("x", 3600))
	s, e := "acme/c1", ""
	n, big := int64(7), int64(1)<<40
	bs, none := []byte{0, 1, 0xff}, []byte(nil)
	cases := []struct {
		name        string
		oid         uint32
		plain, ours any
	}{
		{"text", pgtype.TextOID, s, (*Text)(&s)},
		{"empty text", pgtype.TextOID, e, (*Text)(&e)},
		{"null text", pgtype.TextOID, pgtype.Text{}, (*NullText)(&e)},
		{"non-null text", pgtype.TextOID, s, (*NullText)(&s)},
		{"bigint", pgtype.Int8OID, n, (*Int64)(&n)},
		{"large bigint", pgtype.Int8OID, big, (*Int64)(&big)},
		{"bytea", pgtype.ByteaOID, bs, (*Bytes)(&bs)},
		{"null bytea", pgtype.ByteaOID, none, (*Bytes)(&none)},
		{"timestamptz", pgtype.TimestamptzOID, at, (*Time)(&at)},
		{"text[]", pgtype.TextArrayOID, []string{"a", "", "é"}, TextArray{"a", "", "é"}},
		{"empty text[]", pgtype.TextArrayOID, []string{}, TextArray{}},
		{"nil text[]", pgtype.TextArrayOID, []string(nil), TextArray(nil)},
		{"text[] with NULLs", pgtype.TextArrayOID, []pgtype.Text{{String: "k", Valid: true}, {}}, NullTextArray{"k", ""}},
		{"bigint[]", pgtype.Int8ArrayOID, []int64{1, -2, big}, Int64Array{1, -2, big}},
		{"bytea[]", pgtype.ByteaArrayOID, [][]byte{bs, nil, {}}, BytesArray{bs, nil, {}}},
		{"timestamptz[]", pgtype.TimestamptzArrayOID, []time.Time{at, at.Add(time.Hour)}, TimeArray{at, at.Add(time.Hour)}},
	}
	for _, c := range cases {
		if want, got := encode(t, m, c.oid, c.plain), encode(t, m, c.oid, c.ours); !bytes.Equal(got, want) {
			t.Errorf("%s: sends % x, pgx sends % x for the plain value", c.name, got, want)
		}
	}
}

// TestArrayAllocs: an array costs one allocation (its dimensions) however
// many elements it holds, where pgx's own slices cost one an element.
func TestArrayAllocs(t *testing.T) {
	m := pgtype.NewMap()
	names := make([]string, 64)
	seqs := make([]int64, 64)
	times := make([]time.Time, 64)
	data := make([][]byte, 64)
	for i := range names {
		names[i], seqs[i], times[i], data[i] = "acme/chain", int64(1000+i), time.Now(), []byte("payload")
	}
	buf := make([]byte, 0, 64<<10)
	for _, c := range []struct {
		oid uint32
		v   any
	}{{pgtype.TextArrayOID, TextArray(names)}, {pgtype.TextArrayOID, NullTextArray(names)}, {pgtype.Int8ArrayOID, Int64Array(seqs)},
		{pgtype.TimestamptzArrayOID, TimeArray(times)}, {pgtype.ByteaArrayOID, BytesArray(data)}} {
		encode(t, m, c.oid, c.v) // plans it
		if n := testing.AllocsPerRun(20, func() { _, _ = m.Encode(c.oid, pgtype.BinaryFormatCode, c.v, buf[:0]) }); n > 1 {
			t.Errorf("%T: %v allocations for 64 elements, want at most 1", c.v, n)
		}
	}
}
