package blake3batch

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math/big"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/zeebo/blake3"
	"pgregory.net/rapid"
)

// elementsByDefinition sums the elements one at a time as the definition
// says: the keyed BLAKE3 hash of digest || u64be(seq), read as a 256-bit
// little-endian number, added mod 2^256.
func elementsByDefinition(key *[KeySize]byte, digests [][ElementDigestSize]byte, seqs []uint64) (sum [4]uint64) {
	for i := range digests {
		var message [ElementSize]byte
		copy(message[:], digests[i][:])
		binary.BigEndian.PutUint64(message[ElementDigestSize:], seqs[i])
		h := zeeboKeyed(key, message[:])
		var carry uint64
		for j := range sum {
			var c uint64
			sum[j], c = addWithCarry(sum[j], binary.LittleEndian.Uint64(h[8*j:]), carry)
			carry = c
		}
	}
	return sum
}

func addWithCarry(a, b, carry uint64) (uint64, uint64) {
	s := a + b + carry
	if s < a || (s == a && (b != 0 || carry != 0)) {
		return s, 1
	}
	return s, 0
}

func randomElements(random *rand.Rand, n int) ([][ElementDigestSize]byte, []uint64) {
	digests := make([][ElementDigestSize]byte, n)
	seqs := make([]uint64, n)
	for i := range digests {
		for j := range digests[i] {
			digests[i][j] = byte(random.Uint32())
		}
		seqs[i] = random.Uint64() >> random.IntN(64)
	}
	return digests, seqs
}

// Elements.Add sums what the definition sums, on every lane path, for
// every count around the lanes' group of 16 and past several groups.
func TestElementsAddMatchesDefinition(t *testing.T) {
	paths(t, func(t *testing.T) {
		random := rand.New(rand.NewPCG(21, 21))
		var e Elements
		for _, n := range []int{0, 1, 2, 7, 8, 9, 15, 16, 17, 31, 32, 33, 100, 512, 1000} {
			var key [KeySize]byte
			for i := range key {
				key[i] = byte(random.Uint32())
			}
			e.Reset(&key)
			digests, seqs := randomElements(random, n)
			for i := range digests {
				e.Add(&digests[i], seqs[i])
			}
			sum, count := e.Sum()
			if want := elementsByDefinition(&key, digests, seqs); sum != want || count != uint64(n) {
				t.Fatalf("%d elements: sum %x count %d, want %x and %d", n, sum, count, want, n)
			}
			// Sum empties e.
			if sum, count := e.Sum(); sum != [4]uint64{} || count != 0 {
				t.Fatalf("%d elements: a second Sum %x, %d, want zero", n, sum, count)
			}
		}
	})
}

// keyDigestBlocks lays keys out as the digest messages AddKeyDigests
// takes: domain || key, zero-padded to a block each.
func keyDigestBlocks(domain string, keys [][]byte) ([]byte, []uint8, [][ElementDigestSize]byte) {
	blocks := make([]byte, len(keys)*BlockSize)
	lengths := make([]uint8, len(keys))
	digests := make([][ElementDigestSize]byte, len(keys))
	for i, key := range keys {
		message := append([]byte(domain), key...)
		copy(blocks[i*BlockSize:], message)
		lengths[i] = uint8(len(message))
		h := blake3.Sum256(message)
		copy(digests[i][:], h[:ElementDigestSize])
	}
	return blocks, lengths, digests
}

// AddKeyDigests sums the elements whose digests are the first 16 bytes
// of each message's hash, mixed with Add's elements in one sum, on every
// lane path, with messages of every length 0 to a block.
func TestElementsAddKeyDigestsMatchesDefinition(t *testing.T) {
	paths(t, func(t *testing.T) {
		random := rand.New(rand.NewPCG(22, 22))
		var e Elements
		for _, n := range []int{1, 2, 15, 16, 17, 33, 64, 65, 300} {
			var key [KeySize]byte
			for i := range key {
				key[i] = byte(random.Uint32())
			}
			e.Reset(&key)
			keys := make([][]byte, n)
			for i := range keys {
				keys[i] = make([]byte, random.IntN(BlockSize-14+1))
				for j := range keys[i] {
					keys[i][j] = byte(random.Uint32())
				}
			}
			blocks, lengths, digests := keyDigestBlocks("ledger/key/v1\x00", keys)
			seqs := make([]uint64, n)
			for i := range seqs {
				seqs[i] = random.Uint64()
			}
			// Some elements added one by one before and after, pending
			// across the call.
			extra, extraSeqs := randomElements(random, random.IntN(20))
			half := len(extra) / 2
			for i := range extra[:half] {
				e.Add(&extra[i], extraSeqs[i])
			}
			e.AddKeyDigests(blocks, lengths, seqs)
			for i := half; i < len(extra); i++ {
				e.Add(&extra[i], extraSeqs[i])
			}
			sum, count := e.Sum()
			want := elementsByDefinition(&key, append(digests, extra...), append(seqs, extraSeqs...))
			if sum != want || count != uint64(n+len(extra)) {
				t.Fatalf("%d messages and %d elements: sum %x count %d, want %x and %d", n, len(extra), sum, count, want, n+len(extra))
			}
		}
		lengths := []uint8{BlockSize + 1}
		mustPanic(t, func() { e.AddKeyDigests(make([]byte, BlockSize), lengths, []uint64{1}) })
		mustPanic(t, func() { e.AddKeyDigests(make([]byte, BlockSize), []uint8{1, 1}, []uint64{1, 2}) })
		mustPanic(t, func() { e.AddKeyDigests(make([]byte, 2*BlockSize), []uint8{1, 1}, []uint64{1}) })
	})
}

// fold computes the sum over w of the lanes' sums of word w times
// 2^(32w), mod 2^256, added to what sum held: checked with math/big on
// lane sums up to 2^64-1, where every carry between limbs happens.
func TestElementsFold(t *testing.T) {
	random := rand.New(rand.NewPCG(23, 23))
	modulus := new(big.Int).Lsh(big.NewInt(1), 256)
	limbs := func(x *big.Int) (out [4]uint64) {
		b := make([]byte, 32)
		x.FillBytes(b)
		for j := range out {
			out[j] = binary.BigEndian.Uint64(b[32-8*(j+1):])
		}
		return out
	}
	for round := range 2000 {
		var e Elements
		want := new(big.Int)
		for j := range e.sum {
			e.sum[j] = random.Uint64()
			want.Add(want, new(big.Int).Lsh(new(big.Int).SetUint64(e.sum[j]), uint(64*j)))
		}
		for w := range e.acc {
			for lane := range e.acc[w] {
				switch random.IntN(4) {
				case 0:
					e.acc[w][lane] = ^uint64(0)
				case 1:
					e.acc[w][lane] = random.Uint64() >> random.IntN(64)
				case 2:
					e.acc[w][lane] = 0
				default:
					e.acc[w][lane] = random.Uint64()
				}
				want.Add(want, new(big.Int).Lsh(new(big.Int).SetUint64(e.acc[w][lane]), uint(32*w)))
			}
		}
		want.Mod(want, modulus)
		e.fold()
		if got := limbs(want); e.sum != got {
			t.Fatalf("round %d: fold %x, want %x", round, e.sum, got)
		}
		if e.acc != [8][elementGroup]uint64{} || e.added != 0 {
			t.Fatalf("round %d: fold left the lanes' sums", round)
		}
	}
}

// Adding elements does not allocate.
func TestElementsDoesNotAllocate(t *testing.T) {
	if !lanePathAvailable() {
		t.Skip("one message at a time goes through zeebo/blake3's keyed hasher")
	}
	random := rand.New(rand.NewPCG(24, 24))
	var key [KeySize]byte
	e := new(Elements)
	e.Reset(&key)
	digests, seqs := randomElements(random, 100)
	blocks, lengths, _ := keyDigestBlocks("d", make([][]byte, 100))
	if n := testing.AllocsPerRun(5, func() {
		for i := range digests {
			e.Add(&digests[i], seqs[i])
		}
		e.AddKeyDigests(blocks, lengths, seqs)
		e.Sum()
	}); n != 0 {
		t.Fatalf("%v allocations", n)
	}
}

// BenchmarkElements is the index side of a verify's key check (Add) and
// its entries' side (AddKeyDigests: the key's digest, then the element)
// beside the same sums through Sum256Blocks and a 256-bit addition per
// hash, in the same iterations; ratio is the latter's time over the
// former's.
func BenchmarkElements(b *testing.B) {
	random := rand.New(rand.NewPCG(25, 25))
	const n = 512
	var key [KeySize]byte
	digests, seqs := randomElements(random, n)
	keys := make([][]byte, n)
	for i := range keys {
		keys[i] = []byte(fmt.Sprintf("%032x", random.Uint64()))
	}
	keyBlocks, keyLengths, _ := keyDigestBlocks("ledger/key/v1\x00", keys)
	elementBlocks := make([]byte, n*BlockSize)
	elementLengths := make([]uint8, n)
	hashes := make([][Size]byte, n)
	keyDigests := make([][ElementDigestSize]byte, n)
	var e Elements
	e.Reset(&key)
	var baseline, lanes time.Duration
	for b.Loop() {
		start := time.Now()
		for i := range digests {
			e.Add(&digests[i], seqs[i])
		}
		e.AddKeyDigests(keyBlocks, keyLengths, seqs)
		e.Sum()
		lanes += time.Since(start)
		start = time.Now()
		var sum [4]uint64
		for pass := range 2 {
			elements := digests
			if pass == 1 {
				Sum256Blocks(hashes, nil, keyBlocks, keyLengths)
				for i := range hashes {
					copy(keyDigests[i][:], hashes[i][:ElementDigestSize])
				}
				elements = keyDigests
			}
			for i := range elements {
				m := elementBlocks[i*BlockSize : (i+1)*BlockSize]
				clear(m)
				copy(m, elements[i][:])
				binary.BigEndian.PutUint64(m[ElementDigestSize:], seqs[i])
				elementLengths[i] = ElementSize
			}
			Sum256Blocks(hashes, &key, elementBlocks, elementLengths)
			for i := range hashes {
				var carry uint64
				for j := range sum {
					sum[j], carry = addWithCarry(sum[j], binary.LittleEndian.Uint64(hashes[i][8*j:]), carry)
				}
			}
		}
		baseline += time.Since(start)
	}
	b.ReportMetric(float64(lanes)/float64(b.N*2*n), "ns/element")
	b.ReportMetric(float64(baseline)/float64(b.N*2*n), "blocks-ns/element")
	b.ReportMetric(float64(baseline)/float64(lanes), "ratio")
}

// Elements against a plain model, the elements added since the last Sum
// or Reset: random Adds, AddKeyDigests of random batches, Sums and Resets
// with new keys, on every lane path.
func TestElementsMachine(t *testing.T) {
	paths(t, func(t *testing.T) {
		rapid.Check(t, func(rt *rapid.T) {
			var (
				e       Elements
				key     [KeySize]byte
				digests [][ElementDigestSize]byte
				seqs    []uint64
			)
			reset := func(rt *rapid.T) {
				copy(key[:], rapid.SliceOfN(rapid.Byte(), KeySize, KeySize).Draw(rt, "key"))
				e.Reset(&key)
				digests, seqs = digests[:0], seqs[:0]
			}
			reset(rt)
			rt.Repeat(map[string]func(*rapid.T){
				"add": func(rt *rapid.T) {
					var d [ElementDigestSize]byte
					copy(d[:], rapid.SliceOfN(rapid.Byte(), ElementDigestSize, ElementDigestSize).Draw(rt, "digest"))
					seq := rapid.Uint64().Draw(rt, "seq")
					e.Add(&d, seq)
					digests, seqs = append(digests, d), append(seqs, seq)
				},
				"addKeyDigests": func(rt *rapid.T) {
					n := rapid.IntRange(0, 40).Draw(rt, "messages")
					keys := make([][]byte, n)
					batchSeqs := make([]uint64, n)
					for i := range keys {
						keys[i] = rapid.SliceOfN(rapid.Byte(), 0, BlockSize-14).Draw(rt, "key")
						batchSeqs[i] = rapid.Uint64().Draw(rt, "seq")
					}
					blocks, lengths, keyDigests := keyDigestBlocks("ledger/key/v1\x00", keys)
					e.AddKeyDigests(blocks, lengths, batchSeqs)
					digests, seqs = append(digests, keyDigests...), append(seqs, batchSeqs...)
				},
				"sum": func(rt *rapid.T) {
					sum, count := e.Sum()
					if want := elementsByDefinition(&key, digests, seqs); sum != want || count != uint64(len(digests)) {
						rt.Fatalf("Sum %x, %d; want %x, %d", sum, count, want, len(digests))
					}
					digests, seqs = digests[:0], seqs[:0]
				},
				"reset": reset,
			})
			// What is left is summed too.
			sum, count := e.Sum()
			if want := elementsByDefinition(&key, digests, seqs); sum != want || count != uint64(len(digests)) {
				rt.Fatalf("final Sum %x, %d; want %x, %d", sum, count, want, len(digests))
			}
		})
	})
}

// FuzzElements holds Elements to the definition on every lane path: data
// is a key, then elements of ElementSize bytes each (digest || u64be(seq))
// added one by one, then keys of keyLength bytes (at most a block's
// message) summed through AddKeyDigests with seqs counting up.
func FuzzElements(f *testing.F) {
	f.Add([]byte{}, uint8(0))
	f.Add(bytes.Repeat([]byte{0xa5}, KeySize+ElementSize*17+33*20), uint8(33))
	f.Add(bytes.Repeat([]byte{0xff, 0}, KeySize+ElementSize*40), uint8(50))
	f.Fuzz(func(t *testing.T, data []byte, keyLength uint8) {
		var key [KeySize]byte
		data = data[copy(key[:], data):]
		var digests [][ElementDigestSize]byte
		var seqs []uint64
		for ; len(data) >= ElementSize && len(digests) < 64; data = data[ElementSize:] {
			digests = append(digests, [ElementDigestSize]byte(data[:ElementDigestSize]))
			seqs = append(seqs, binary.BigEndian.Uint64(data[ElementDigestSize:]))
		}
		var keys [][]byte
		length := int(keyLength) % (BlockSize - 14 + 1)
		for ; len(data) >= length && len(keys) < 64; data = data[length:] {
			keys = append(keys, data[:length])
			if length == 0 && len(keys) == 3 {
				break
			}
		}
		blocks, lengths, keyDigests := keyDigestBlocks("ledger/key/v1\x00", keys)
		keySeqs := make([]uint64, len(keys))
		for i := range keySeqs {
			keySeqs[i] = uint64(i) << 40
		}
		want := elementsByDefinition(&key, append(append([][ElementDigestSize]byte(nil), digests...), keyDigests...), append(append([]uint64(nil), seqs...), keySeqs...))
		for _, width := range lanePaths() {
			restore := useLaneWidth(width)
			var e Elements
			e.Reset(&key)
			for i := range digests {
				e.Add(&digests[i], seqs[i])
			}
			e.AddKeyDigests(blocks, lengths, keySeqs)
			sum, count := e.Sum()
			restore()
			if sum != want || count != uint64(len(digests)+len(keys)) {
				t.Fatalf("lanes %d: %d elements and %d keys: sum %x count %d, want %x", width, len(digests), len(keys), sum, count, want)
			}
		}
	})
}
