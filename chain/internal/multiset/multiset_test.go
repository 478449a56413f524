package multiset

import (
	"encoding/binary"
	"math/big"
	mathrand "math/rand/v2"
	"testing"

	"github.com/zeebo/blake3"
	"pgregory.net/rapid"

	"github.com/ledgerworks/ledger/storage"
)

// multisetElement is one (key digest, seq) pair.
type multisetElement struct {
	digest [storage.KeyDigestSize]byte
	seq    uint64
}

func multisetOf(k *Key, elements []multisetElement) Sum {
	items := make([]Item, len(elements))
	for i, e := range elements {
		items[i] = Item{Digest: e.digest, Seq: e.seq}
	}
	var m Sum
	NewHasher(k).Sum(&m, items, true)
	return m
}

func drawElement(t *rapid.T, label string) multisetElement {
	var e multisetElement
	copy(e.digest[:], rapid.SliceOfN(rapid.Byte(), storage.KeyDigestSize, storage.KeyDigestSize).Draw(t, label+" digest"))
	e.seq = rapid.Uint64().Draw(t, label+" seq")
	return e
}

// TestMultisetSumOrderAndChanges: the sum of a multiset does not depend on
// the order its elements are added in, nor on how they are split among
// partial sums; any single change (a seq, a bit of a digest, an element
// removed, repeated or added) changes the sum or the count.
func TestMultisetSumOrderAndChanges(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		var k Key
		copy(k[:], rapid.SliceOfN(rapid.Byte(), KeySize, KeySize).Draw(t, "key"))
		elements := rapid.SliceOfN(rapid.Custom(func(t *rapid.T) multisetElement { return drawElement(t, "element") }), 0, 40).Draw(t, "elements")
		whole := multisetOf(&k, elements)

		permuted := rapid.Permutation(elements).Draw(t, "permutation")
		split := rapid.IntRange(0, len(permuted)).Draw(t, "split")
		left, right := multisetOf(&k, permuted[:split]), multisetOf(&k, permuted[split:])
		left.Merge(&right)
		if left != whole {
			t.Fatalf("a permutation split at %d sums to %v, the original to %v", split, left, whole)
		}

		changed := append([]multisetElement(nil), elements...)
		op := rapid.IntRange(0, 4).Draw(t, "change")
		if len(changed) == 0 {
			op = 4
		}
		switch op {
		case 0: // another seq
			i := rapid.IntRange(0, len(changed)-1).Draw(t, "index")
			delta := rapid.Uint64Min(1).Draw(t, "delta")
			changed[i].seq += delta
		case 1: // one bit of a digest
			i := rapid.IntRange(0, len(changed)-1).Draw(t, "index")
			bit := rapid.IntRange(0, 8*storage.KeyDigestSize-1).Draw(t, "bit")
			changed[i].digest[bit/8] ^= 1 << (bit % 8)
		case 2: // an element removed
			i := rapid.IntRange(0, len(changed)-1).Draw(t, "index")
			changed = append(changed[:i], changed[i+1:]...)
		case 3: // an element repeated
			i := rapid.IntRange(0, len(changed)-1).Draw(t, "index")
			changed = append(changed, changed[i])
		case 4: // an element added
			changed = append(changed, drawElement(t, "added"))
		}
		if got := multisetOf(&k, changed); got == whole {
			t.Fatalf("change %d leaves the sum and count as they were: %v", op, got)
		}
	})
}

// TestMultisetElementDefinition pins the element's number: BLAKE3 keyed
// with the verify's key over digest || u64be(seq), read little-endian, and
// the sum mod 2^256.
func TestMultisetElementDefinition(t *testing.T) {
	var k Key
	for i := range k {
		k[i] = byte(i)
	}
	elements := []multisetElement{{digest: storage.KeyDigest("a"), seq: 1}, {digest: storage.KeyDigest("b"), seq: 1 << 40}}
	for i := range 300 { // enough numbers near 2^256 to wrap around
		elements = append(elements, multisetElement{digest: storage.KeyDigest(string(rune('c' + i))), seq: uint64(i)})
	}
	want := new(big.Int)
	modulus := new(big.Int).Lsh(big.NewInt(1), 256)
	definition := keyedHasher(t, &k)
	for _, e := range elements {
		hash := elementByDefinition(definition, e.digest, e.seq)
		sum := hash[:]
		for i, j := 0, len(sum)-1; i < j; i, j = i+1, j-1 {
			sum[i], sum[j] = sum[j], sum[i] // little-endian to big.Int's big-endian
		}
		want.Add(want, new(big.Int).SetBytes(sum))
	}
	want.Mod(want, modulus)
	got := multisetOf(&k, elements)
	gotInt := new(big.Int)
	for i := len(got.sum) - 1; i >= 0; i-- {
		gotInt.Lsh(gotInt, 64).Or(gotInt, new(big.Int).SetUint64(got.sum[i]))
	}
	if gotInt.Cmp(want) != 0 || got.Count() != uint64(len(elements)) {
		t.Fatalf("sum %x count %d, want %x count %d", gotInt, got.Count(), want, len(elements))
	}
	// From keys, digested in the batch: the same as from their digests.
	keyed := []Item{{Key: "a", Seq: 1}, {Key: "b", Seq: 1 << 40}}
	for i := range 300 {
		keyed = append(keyed, Item{Key: string(rune('c' + i)), Seq: uint64(i)})
	}
	var fromKeys Sum
	NewHasher(&k).Sum(&fromKeys, keyed, false)
	if fromKeys != got {
		t.Fatalf("summed from keys %v, from their digests %v", fromKeys, got)
	}
	var other Key
	other[0] = 1
	if multisetOf(&other, elements) == got {
		t.Fatal("another key gives the same sum")
	}
}

// One hasher, reused across batches, sums keys of every length (one-block
// digest messages up to keyBlockLengthMax bytes, longer ones, both in one
// batch) and digests as the definition does: each element's number is
// computed here one at a time with storage.KeyDigest and zeebo/blake3. A
// block left dirty by a longer message before it, or a long key hashed as
// one block, changes the sum.
func TestMultisetHasherKeysOfEveryLength(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		var k Key
		copy(k[:], rapid.SliceOfN(rapid.Byte(), KeySize, KeySize).Draw(t, "key"))
		mh := NewHasher(&k)
		definition := keyedHasher(t, &k)
		for batch := range rapid.IntRange(1, 4).Draw(t, "batches") {
			longest := rapid.SampledFrom([]int{keyBlockLengthMax, keyBlockLengthMax + 1, keyLengthMax}).Draw(t, "longest")
			n := rapid.IntRange(0, 40).Draw(t, "items")
			digested := rapid.Bool().Draw(t, "digested")
			items := make([]Item, n)
			var want Sum
			for i := range items {
				key := string(rapid.SliceOfN(rapid.Byte(), 0, longest).Draw(t, "item key"))
				items[i] = Item{Key: key, Digest: storage.KeyDigest(key), Seq: rapid.Uint64().Draw(t, "item seq")}
				if digested {
					items[i].Key = "" // the index side carries digests only
				}
				sum := elementByDefinition(definition, items[i].Digest, items[i].Seq)
				want.addHash(&sum)
			}
			var got Sum
			mh.Sum(&got, items, digested)
			if got != want {
				t.Fatalf("batch %d (%d items, keys up to %d bytes, digested %v): sum %v, want %v", batch, n, longest, digested, got, want)
			}
		}
	})
}

// addHashes sums as addHash one hash at a time does, carries across limbs
// and out of the top included: hashes of all ones, of ones with one limb
// zero, and random ones, onto sums near 2^256.
func TestAddHashesMatchesAddHash(t *testing.T) {
	random := mathrand.New(mathrand.NewPCG(12, 12))
	for round := range 200 {
		hashes := make([][32]byte, random.IntN(600))
		for i := range hashes {
			for j := range hashes[i] {
				hashes[i][j] = byte(random.Uint32())
			}
			switch random.IntN(4) {
			case 0:
				for j := range hashes[i] {
					hashes[i][j] = 0xff
				}
			case 1:
				for j := range hashes[i] {
					hashes[i][j] = 0xff
				}
				clear(hashes[i][8*random.IntN(4):][:8])
			}
		}
		var start Sum
		for i := range start.sum {
			start.sum[i] = ^uint64(random.IntN(3))
		}
		start.count = uint64(round)
		got, want := start, start
		got.addHashes(hashes)
		for i := range hashes {
			want.addHash(&hashes[i])
		}
		if got != want {
			t.Fatalf("round %d (%d hashes): addHashes %v, addHash %v", round, len(hashes), got, want)
		}
	}
}

// keyedHasher returns a BLAKE3 hasher keyed with k, for elementByDefinition.
func keyedHasher(t interface{ Fatal(...any) }, k *Key) *blake3.Hasher {
	h, err := blake3.NewKeyed(k[:])
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// elementByDefinition is the hash of one element of the key multiset as the
// check defines it, BLAKE3-keyed(k, digest || u64be(seq)), computed one at a
// time with zeebo/blake3 (h keyed with k, reset here).
func elementByDefinition(h *blake3.Hasher, digest [storage.KeyDigestSize]byte, seq uint64) [32]byte {
	h.Reset()
	h.Write(digest[:])
	h.Write(binary.BigEndian.AppendUint64(nil, seq))
	var sum [32]byte
	h.Sum(sum[:0])
	return sum
}

// keyLengthMax is the longest idempotency key the chain package accepts
// (chain.IdempotencyKeyLengthMax).
const keyLengthMax = 256
