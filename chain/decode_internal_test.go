package chain

import (
	"bytes"
	"testing"
)

// FuzzDecodeFields: Verify's copy-free decoder accepts exactly the records
// DecodeRecord accepts, reads the same fields, and hashes them as
// ComputeHash does. Seeds: testdata/fuzz/FuzzDecodeFields (vectorgen).
func FuzzDecodeFields(f *testing.F) {
	e := Entry{Chain: "c", Seq: 1, PrevHash: Genesis("c"), TimeUnixNano: 1, IdempotencyKey: "k", Type: "t", Payload: []byte("p")}
	e.Hash = e.ComputeHash()
	f.Add(EncodeRecord(&e), uint64(1))
	f.Fuzz(func(t *testing.T, data []byte, seq uint64) {
		want, wantErr := DecodeRecord("c", seq, data)
		fields, ok := decodeFields(data)
		if ok != (wantErr == nil) {
			t.Fatalf("decodeFields ok=%v, DecodeRecord %v", ok, wantErr)
		}
		if !ok {
			return
		}
		if fields.prevHash != want.PrevHash || fields.hash != want.Hash || fields.timeUnixNano != want.TimeUnixNano ||
			string(fields.key) != want.IdempotencyKey || string(fields.typ) != want.Type || !bytes.Equal(fields.payload, want.Payload) {
			t.Fatalf("decodeFields %+v, DecodeRecord %+v", fields, want)
		}
		item := verifyItem{seq: seq, data: data}
		hashItem("c", &item, nil)
		if item.err != nil || item.calculated != want.ComputeHash() || item.entry.Hash != want.Hash {
			t.Fatalf("hashItem %+v, want hash %s", item, want.ComputeHash())
		}
	})
}
