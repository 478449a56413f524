package chain

import (
	"bytes"
	"testing"
)

// FuzzDecodeFields: Verify's copy-free decoder (and validRecord, its check
// without the fields) accepts exactly the records DecodeRecord accepts, reads the same fields, and hashes them as
// ComputeHash does; the fields Verify's chunks read in place are
// DecodeRecord's. Seeds: testdata/fuzz/FuzzDecodeFields (vectorgen).
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
		if valid := validRecord(data); valid != ok {
			t.Fatalf("validRecord %v, decodeFields ok=%v", valid, ok)
		}
		// The item Verify checks: undecodable exactly when DecodeRecord
		// rejects the bytes, with its words (the failure's detail).
		item := verifyItem{seq: seq, data: data}
		hashItem("c", &item, nil)
		if (item.err == nil) != (wantErr == nil) || (wantErr != nil && item.err.Error() != wantErr.Error()) {
			t.Fatalf("hashItem error %v, DecodeRecord %v", item.err, wantErr)
		}
		if !ok {
			return
		}
		if fields.prevHash != want.PrevHash || fields.hash != want.Hash || fields.timeUnixNano != want.TimeUnixNano ||
			string(fields.key) != want.IdempotencyKey || string(fields.typ) != want.Type || !bytes.Equal(fields.payload, want.Payload) {
			t.Fatalf("decodeFields %+v, DecodeRecord %+v", fields, want)
		}
		if item.err != nil || item.calculated != want.ComputeHash() || *item.hash() != want.Hash {
			t.Fatalf("hashItem %+v, want hash %s", item, want.ComputeHash())
		}
		if got := item.entry("c"); got.Chain != "c" || got.Seq != seq || got.PrevHash != want.PrevHash || got.Hash != want.Hash ||
			got.TimeUnixNano != want.TimeUnixNano || got.IdempotencyKey != want.IdempotencyKey {
			t.Fatalf("fields read in place %+v, DecodeRecord %+v", got, want)
		}
	})
}
