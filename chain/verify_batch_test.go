package chain

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/ledgerworks/ledger/internal/blake3batch"
)

// TestHashItemsMatchesComputeHash hashes batches of stored records the way
// Verify's workers do (inputs built back to back, hashed several at once)
// and compares every item with DecodeRecord and Entry.ComputeHash: short
// and long payloads (past one BLAKE3 chunk, which are hashed alone),
// keyless entries, records only DecodeRecord accepts, and damaged records.
func TestHashItemsMatchesComputeHash(t *testing.T) {
	random := rand.New(rand.NewPCG(9, 9))
	var scratch verifyScratch // reused across batches, as a worker does
	for batch := range 60 {
		chainName := fmt.Sprintf("acme/stock/SKU-%d", batch)
		items := make([]verifyItem, random.IntN(verifyBatchSize+1))
		for i := range items {
			e := Entry{Chain: chainName, Seq: uint64(1 + i), TimeUnixNano: random.Int64(),
				IdempotencyKey: fmt.Sprintf("key-%d", random.IntN(1e9)), Type: "stock.movement/v1"}
			switch random.IntN(10) {
			case 0:
				e.Payload = make([]byte, 1000+random.IntN(3000)) // past a chunk
			case 1:
				e.IdempotencyKey = ""
			}
			if e.Payload == nil {
				e.Payload = make([]byte, random.IntN(900))
			}
			for j := range e.Payload {
				e.Payload[j] = byte(random.Uint32())
			}
			e.PrevHash[random.IntN(HashSize)] = byte(random.IntN(256))
			e.Hash = e.ComputeHash()
			if random.IntN(20) == 0 { // valid text that is not printable ASCII
				e.Type = "mouvement/v1-\u00e9"
			}
			data := EncodeRecord(&e)
			switch random.IntN(25) {
			case 0:
				data = data[:random.IntN(len(data))]
			case 1:
				data[random.IntN(len(data))] ^= byte(1 + random.IntN(255))
			}
			items[i] = verifyItem{seq: e.Seq, data: data}
		}
		scratch.hashItems(chainName, items)
		for i := range items {
			it := &items[i]
			want, wantErr := DecodeRecord(chainName, it.seq, it.data)
			if (it.err == nil) != (wantErr == nil) || (wantErr != nil && it.err.Error() != wantErr.Error()) {
				t.Fatalf("batch %d item %d: error %v, DecodeRecord %v", batch, i, it.err, wantErr)
			}
			if wantErr != nil {
				continue
			}
			if it.calculated != want.ComputeHash() {
				t.Fatalf("batch %d item %d (%d-byte payload): hash %s, ComputeHash %s",
					batch, i, len(want.Payload), it.calculated, want.ComputeHash())
			}
			if got := it.entry(chainName); got.Hash != want.Hash || got.PrevHash != want.PrevHash || got.Seq != want.Seq ||
				got.IdempotencyKey != want.IdempotencyKey || got.TimeUnixNano != want.TimeUnixNano || got.Chain != chainName {
				t.Fatalf("batch %d item %d: fields read in place %+v, DecodeRecord %+v", batch, i, got, want)
			}
		}
	}
}

// The batch path hashes a full batch of typical entries without
// allocating once its scratch has grown.
func TestHashItemsDoesNotAllocate(t *testing.T) {
	items := make([]verifyItem, verifyBatchSize)
	for i := range items {
		e := Entry{Chain: "acme/fin/EUR", Seq: uint64(1 + i), IdempotencyKey: fmt.Sprint("k", i), Type: "fin.posting/v1",
			Payload: make([]byte, 200)}
		e.Hash = e.ComputeHash()
		items[i] = verifyItem{seq: e.Seq, data: EncodeRecord(&e)}
	}
	var scratch verifyScratch
	scratch.hashItems("acme/fin/EUR", items)
	if n := testing.AllocsPerRun(5, func() { scratch.hashItems("acme/fin/EUR", items) }); n != 0 {
		t.Fatalf("hashItems allocates %v times per batch", n)
	}
}

// BenchmarkHashItems is the hashing of one batch of Verify's workers:
// decoding 256 stored records of a P1-like shape (32-byte random key as
// hex, 200-byte payload) and computing their hashes through blake3batch,
// beside the same records hashed one at a time by hashItem, timed in the
// same iterations; ratio is the one-at-a-time time over the batch's.
func BenchmarkHashItems(b *testing.B) {
	random := rand.New(rand.NewPCG(10, 10))
	const chainName = "acme/stock/warehouse-1"
	items := make([]verifyItem, verifyBatchSize)
	for i := range items {
		key := make([]byte, 32)
		for j := range key {
			key[j] = byte(random.Uint32())
		}
		e := Entry{Chain: chainName, Seq: uint64(1 + i), TimeUnixNano: random.Int64(),
			IdempotencyKey: fmt.Sprintf("%x", key), Type: "bench.entry/v1", Payload: make([]byte, 200)}
		e.Hash = e.ComputeHash()
		items[i] = verifyItem{seq: e.Seq, data: EncodeRecord(&e)}
	}
	var scratch verifyScratch
	var one []byte
	var baseline time.Duration
	for b.Loop() {
		scratch.hashItems(chainName, items)
		b.StopTimer()
		start := time.Now()
		for i := range items {
			one = hashItem(chainName, &items[i], one)
		}
		baseline += time.Since(start)
		b.StartTimer()
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(items)), "ns/entry")
	b.ReportMetric(float64(baseline.Nanoseconds())/float64(b.N*len(items)), "one-at-a-time-ns/entry")
	b.ReportMetric(baseline.Seconds()/b.Elapsed().Seconds(), "ratio")
}

// printableASCII, which tests eight bytes at a time, agrees with a test of
// each byte: every byte value at every position of words and tails, and
// random mixes.
func TestPrintableASCII(t *testing.T) {
	each := func(b []byte) bool {
		for _, c := range b {
			if c < 0x20 || c >= 0x7f {
				return false
			}
		}
		return true
	}
	for n := range 20 {
		for position := range n {
			for value := range 256 {
				b := bytes.Repeat([]byte{'a'}, n)
				b[position] = byte(value)
				if got, want := printableASCII(b), each(b); got != want {
					t.Fatalf("%x: printableASCII %v, want %v", b, got, want)
				}
			}
		}
	}
	random := rand.New(rand.NewPCG(11, 11))
	for range 100000 {
		b := make([]byte, random.IntN(40))
		for i := range b {
			b[i] = byte(0x1c + random.IntN(0x68)) // mostly printable, around both edges
			if random.IntN(50) == 0 {
				b[i] = byte(random.IntN(256))
			}
		}
		if got, want := printableASCII(b), each(b); got != want {
			t.Fatalf("%x: printableASCII %v, want %v", b, got, want)
		}
	}
}

// hashItems agrees with Entry.ComputeHash for chain ids whose fixed part
// of the hash input (the fields before the key) ends just before, at and
// just after every block boundary of the first five blocks, with payloads
// that put the whole input just under, at and just over one chunk (over
// goes one at a time); the records are not written.
func TestHashItemsEveryHeadAndChunkBoundary(t *testing.T) {
	random := rand.New(rand.NewPCG(12, 12))
	var scratch verifyScratch
	for _, chainLength := range []int{1, 59, 60, 61, 123, 124, 125, 187, 188, 189, 251, 252, 253, ChainLengthMax} {
		chainName := strings.Repeat("c", chainLength)
		head := recordHashHeaderSize(chainName)
		items := make([]verifyItem, 0, 40)
		for i := range cap(items) {
			e := Entry{Chain: chainName, Seq: uint64(1 + i), TimeUnixNano: random.Int64(),
				IdempotencyKey: fmt.Sprintf("key-%d", i), Type: "t"}
			body := 4 + len(e.IdempotencyKey) + 4 + len(e.Type) + 4
			// Inputs of every length from 20 bytes under a chunk to 19
			// over, and every fourth from the head alone on.
			total := blake3batch.ChunkSize - 20 + i
			if i%4 == 0 {
				total = head + body + i
			}
			e.Payload = make([]byte, max(0, total-head-body))
			for j := range e.Payload {
				e.Payload[j] = byte(random.Uint32())
			}
			e.Hash = e.ComputeHash()
			items = append(items, verifyItem{seq: e.Seq, data: EncodeRecord(&e)})
		}
		saved := make([][]byte, len(items))
		for i := range items {
			saved[i] = bytes.Clone(items[i].data)
		}
		scratch.hashItems(chainName, items)
		for i := range items {
			want, err := DecodeRecord(chainName, items[i].seq, items[i].data)
			if err != nil || items[i].err != nil {
				t.Fatalf("chain of %d bytes, item %d: %v, %v", chainLength, i, err, items[i].err)
			}
			if items[i].calculated != want.ComputeHash() {
				t.Fatalf("chain of %d bytes, item %d (%d-byte payload): hash %s, ComputeHash %s",
					chainLength, i, len(want.Payload), items[i].calculated, want.ComputeHash())
			}
			if !bytes.Equal(items[i].data, saved[i]) {
				t.Fatalf("chain of %d bytes, item %d: the record was written", chainLength, i)
			}
		}
	}
}
