package chain

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"reflect"
	"testing"

	bbolt "go.etcd.io/bbolt"

	"github.com/ledgerworks/ledger/storage/bolt"
)

// TestDecodeFieldsAgreesWithDecodeRecord mutates stored records at random:
// the copy-free decoder of Verify must accept exactly what DecodeRecord
// accepts, read the same fields, and hash them as ComputeHash does.
func TestDecodeFieldsAgreesWithDecodeRecord(t *testing.T) {
	random := rand.New(rand.NewPCG(8, 8))
	var scratch []byte
	for i := range 4000 {
		e := Entry{Chain: "acme/stock/SKU-1", Seq: uint64(1 + random.IntN(1000)), TimeUnixNano: random.Int64(),
			IdempotencyKey: fmt.Sprintf("key-%d", random.IntN(1e6)), Type: "stock.movement/v1",
			Payload: make([]byte, random.IntN(300))}
		if i%7 == 0 {
			e.IdempotencyKey = ""
		}
		e.PrevHash[random.IntN(HashSize)] = byte(random.IntN(256))
		e.Hash = e.ComputeHash()
		data := EncodeRecord(&e)
		if i%5 == 0 { // text beyond ASCII, valid or not, takes the slow path
			e.IdempotencyKey = string([]byte{'k', byte(0x7f + random.IntN(0x81)), byte(random.IntN(256))})
			e.Type = "typ\u00e9" + string([]rune{rune(random.IntN(0x300))})
		}
		switch i % 4 { // damage most records: flip, cut, extend
		case 1:
			data[random.IntN(len(data))] ^= byte(1 + random.IntN(255))
		case 2:
			data = data[:random.IntN(len(data))]
		case 3:
			data = append(data, byte(random.IntN(256)))
		}
		want, wantErr := DecodeRecord(e.Chain, e.Seq, data)
		f, ok := decodeFields(data)
		if ok != (wantErr == nil) {
			t.Fatalf("record %d (%x): decodeFields ok=%v, DecodeRecord err=%v", i, data, ok, wantErr)
		}
		if !ok {
			continue
		}
		got := Entry{Chain: e.Chain, Seq: e.Seq, PrevHash: f.prevHash, TimeUnixNano: f.timeUnixNano,
			IdempotencyKey: string(f.key), Type: string(f.typ), Payload: append([]byte{}, f.payload...), Hash: f.hash}
		if !reflect.DeepEqual(got, want) && !(len(got.Payload) == 0 && len(want.Payload) == 0) {
			t.Fatalf("record %d: decodeFields %+v, DecodeRecord %+v", i, got, want)
		}
		var h Hash
		h, scratch = entryHash(scratch, e.Chain, e.Seq, &f.prevHash, f.timeUnixNano, f.key, f.typ, f.payload)
		if h != want.ComputeHash() || hashOf(&want) != h {
			t.Fatalf("record %d: entryHash %s, hashOf %s, ComputeHash %s", i, h, hashOf(&want), want.ComputeHash())
		}
	}
}

// TestVerifyPoolMatchesSequentialVerifier damages entries around batch
// boundaries of a chain long enough for the worker pool, and compares
// Verify's failures with a ChainVerifier fed one decoded entry at a time.
func TestVerifyPoolMatchesSequentialVerifier(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "l.db")
	db, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	const chainName, n = "pool", 5*verifyBatchSize + 17
	err = db.Update(ctx, func(tx *Tx) error {
		for i := range n {
			if _, err := tx.Append(Request{Chain: chainName, IdempotencyKey: fmt.Sprint(i), Type: "t/v1", Payload: []byte(fmt.Sprint("p", i))}); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	db.Close()

	damaged := []uint64{1, verifyBatchSize, verifyBatchSize + 1, 3*verifyBatchSize + 5, n}
	raw, err := bbolt.Open(path, bolt.FileMode, bolt.BboltOptions(bolt.Options{}))
	if err != nil {
		t.Fatal(err)
	}
	err = raw.Update(func(btx *bbolt.Tx) error {
		id, err := bolt.ChainID(btx, chainName)
		if err != nil {
			return err
		}
		for i, seq := range damaged {
			v := append([]byte(nil), bolt.RawEntry(btx, id, seq)...)
			if i%2 == 0 {
				v[len(v)-1] ^= 1 // payload: hash mismatch
			} else {
				v[0] = 9 // version: undecodable
			}
			if err := bolt.PutRawEntry(btx, id, seq, v); err != nil {
				return err
			}
		}
		return bolt.DeleteRawEntry(btx, id, 2*verifyBatchSize+3) // a gap
	})
	raw.Close()
	if err != nil {
		t.Fatal(err)
	}

	db, err = Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	report, err := db.Verify(ctx, VerifyOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var want []Failure
	v := NewChainVerifier(chainName, func(f Failure) { want = append(want, f) })
	err = db.View(ctx, func(tx *Tx) error {
		for rec, err := range tx.stx.Entries(ctx, chainName, 1) {
			if err != nil {
				return err
			}
			if e, err := DecodeRecord(chainName, rec.Seq, rec.Data); err != nil {
				v.Undecodable(rec.Seq, err)
			} else {
				v.Entry(&e)
			}
		}
		head, err := tx.Head(chainName)
		v.Finish(&head)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	sortFailures(want)
	if len(want) < len(damaged)+1 {
		t.Fatalf("the sequential verifier found only %v", want)
	}
	if !reflect.DeepEqual(report.Failures, want) {
		t.Fatalf("Verify found\n%v\nthe sequential verifier\n%v", report.Failures, want)
	}
	if report.Entries != n-1 {
		t.Errorf("Verify checked %d entries, want %d", report.Entries, n-1)
	}
}

// TestValidRecordTextAtEveryLength builds records whose key and type are
// of every length around the word sizes printableASCII steps by and the
// limits, with one byte of either changed (control characters, the edges
// of printable ASCII, UTF-8 that is valid or not) at its first, middle and
// last place: validRecord and decodeFields accept exactly the records
// DecodeRecord accepts.
func TestValidRecordTextAtEveryLength(t *testing.T) {
	record := func(key, typ []byte) []byte {
		data := make([]byte, recordFieldsOffset, recordFieldsOffset+len(key)+len(typ)+20)
		data[0] = recordVersion
		for _, field := range [][]byte{key, typ, []byte("payload")} {
			data = binary.BigEndian.AppendUint32(data, uint32(len(field)))
			data = append(data, field...)
		}
		return data
	}
	text := func(n int) []byte { return bytes.Repeat([]byte{'a'}, n) }
	keyLengths := []int{0, 1, 7, 8, 9, 15, 16, 17, 24, 31, 32, 33, 64, IdempotencyKeyLengthMax - 1, IdempotencyKeyLengthMax, IdempotencyKeyLengthMax + 1}
	typeLengths := []int{0, 1, 7, 8, 9, 14, 15, 16, 17, 31, 32, 33, TypeLengthMax - 1, TypeLengthMax, TypeLengthMax + 1}
	changes := [][]byte{{0x00}, {0x1f}, {0x20}, {0x7e}, {0x7f}, {0x80}, {0xff}, {0xc3, 0xa9}, {0xc3}, {0x09}}
	checked := 0
	check := func(key, typ []byte) {
		t.Helper()
		data := record(key, typ)
		_, wantErr := DecodeRecord("c", 1, data)
		_, ok := decodeFields(data)
		if valid := validRecord(data); valid != (wantErr == nil) || ok != (wantErr == nil) {
			t.Fatalf("key %q, type %q: validRecord %v, decodeFields %v, DecodeRecord %v", key, typ, valid, ok, wantErr)
		}
		checked++
	}
	for _, k := range keyLengths {
		for _, n := range typeLengths {
			check(text(k), text(n))
			for _, change := range changes {
				for _, field := range []int{0, 1} {
					length := []int{k, n}[field]
					for _, at := range []int{0, length / 2, length - len(change)} {
						if at < 0 || at+len(change) > length {
							continue
						}
						fields := [][]byte{text(k), text(n)}
						copy(fields[field][at:], change)
						check(fields[0], fields[1])
					}
				}
			}
		}
	}
	if checked < 5000 {
		t.Fatalf("only %d records checked", checked)
	}
}

// equalHashes, which compares four words, agrees with == for hashes that
// differ in any one bit, and for equal ones.
func TestEqualHashes(t *testing.T) {
	var a Hash
	for i := range a {
		a[i] = byte(i * 7)
	}
	b := a
	if !equalHashes(&a, &b) {
		t.Fatalf("equal hashes %s compare unequal", a)
	}
	for i := range HashSize * 8 {
		b := a
		b[i/8] ^= 1 << (i % 8)
		if equalHashes(&a, &b) || equalHashes(&b, &a) {
			t.Fatalf("hashes differing in bit %d compare equal", i)
		}
	}
}
