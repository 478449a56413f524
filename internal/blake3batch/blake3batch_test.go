package blake3batch

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/zeebo/blake3"
	"pgregory.net/rapid"
)

// paths runs test on every lane width this CPU has (16 with AVX-512, 8
// with AVX2) and on the one-at-a-time path.
func paths(t *testing.T, test func(t *testing.T)) {
	t.Helper()
	for _, width := range lanePaths() {
		name := fmt.Sprintf("lanes=%d", width)
		if width == 0 {
			name = "one-at-a-time"
		}
		t.Run(name, func(t *testing.T) {
			defer useLaneWidth(width)()
			test(t)
		})
	}
}

func zeeboKeyed(key *[KeySize]byte, message []byte) [Size]byte {
	h, err := blake3.NewKeyed(key[:])
	if err != nil {
		panic(err)
	}
	h.Write(message)
	var out [Size]byte
	h.Sum(out[:0])
	return out
}

// check hashes messages in one batch, unkeyed and keyed, and compares every
// hash with zeebo/blake3's, and the outputs past the batch with untouched.
// failer is what check needs of a *testing.T or a *rapid.T.
type failer interface {
	Helper()
	Fatal(args ...any)
	Fatalf(format string, args ...any)
}

func check(t failer, messages [][]byte, key *[KeySize]byte) {
	t.Helper()
	sentinel := [Size]byte{0xa5}
	out := make([][Size]byte, len(messages)+1)
	out[len(messages)] = sentinel
	Sum256(out, messages)
	for i, m := range messages {
		if want := blake3.Sum256(m); out[i] != want {
			t.Fatalf("message %d of %d (%d bytes): Sum256 %x, want %x", i, len(messages), len(m), out[i], want)
		}
	}
	keyed := make([][Size]byte, len(messages)+1)
	keyed[len(messages)] = sentinel
	Sum256Keyed(keyed, key, messages)
	for i, m := range messages {
		if want := zeeboKeyed(key, m); keyed[i] != want {
			t.Fatalf("message %d of %d (%d bytes): Sum256Keyed %x, want %x", i, len(messages), len(m), keyed[i], want)
		}
	}
	if out[len(messages)] != sentinel || keyed[len(messages)] != sentinel {
		t.Fatal("an output past the messages was written")
	}
}

func randomBytes(r *rand.Rand, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

func testKey(r *rand.Rand) *[KeySize]byte { return (*[KeySize]byte)(randomBytes(r, KeySize)) }

// Every length a lane can carry, eight lanes of the same length and eight
// of consecutive lengths (lanes ending at different blocks), and lengths
// past a chunk that go one at a time.
func TestSum256EveryLength(t *testing.T) {
	paths(t, func(t *testing.T) {
		r := rand.New(rand.NewPCG(1, 2))
		key := testKey(r)
		lengths := []int{1025, 1088, 2048, 2049, 3000, 8193}
		for n := range ChunkSize + 1 {
			lengths = append(lengths, n)
		}
		for _, n := range lengths {
			same := make([][]byte, 8)
			consecutive := make([][]byte, 8)
			for i := range same {
				same[i] = randomBytes(r, n)
				consecutive[i] = randomBytes(r, max(0, n-i))
			}
			check(t, same, key)
			check(t, consecutive, key)
			check(t, same[:1], key)
		}
	})
}

// Batches of 1 to 17 messages of random lengths (some past a chunk) and
// random contents, so groups of eight, short tails and lanes ending at
// every block all occur.
func TestSum256MixedBatches(t *testing.T) {
	paths(t, func(t *testing.T) {
		rapid.Check(t, func(t *rapid.T) {
			count := rapid.IntRange(0, 17).Draw(t, "count")
			messages := make([][]byte, count)
			for i := range messages {
				n := rapid.OneOf(rapid.IntRange(0, ChunkSize), rapid.IntRange(0, 3*ChunkSize),
					rapid.SampledFrom([]int{0, 1, 63, 64, 65, 127, 128, 960, 1023, 1024, 1025})).Draw(t, fmt.Sprint("length", i))
				seed := rapid.Uint64().Draw(t, fmt.Sprint("seed", i))
				messages[i] = randomBytes(rand.New(rand.NewPCG(seed, uint64(n))), n)
			}
			key := (*[KeySize]byte)(rapid.SliceOfN(rapid.Byte(), KeySize, KeySize).Draw(t, "key"))
			check(t, messages, key)
		})
	})
}

// Batches of messages of similar lengths, as a chain's entries are: in a
// group every lane has the blocks below the shortest message's last (the
// loop that only points lanes at them), then lanes end at different blocks,
// and a short group leaves lanes without a message.
func TestSum256SimilarLengths(t *testing.T) {
	paths(t, func(t *testing.T) {
		rapid.Check(t, func(t *rapid.T) {
			count := rapid.IntRange(1, 40).Draw(t, "count")
			base := rapid.IntRange(0, ChunkSize).Draw(t, "base")
			spread := rapid.IntRange(0, 200).Draw(t, "spread")
			messages := make([][]byte, count)
			for i := range messages {
				n := min(ChunkSize, base+rapid.IntRange(0, spread).Draw(t, fmt.Sprint("extra", i)))
				seed := rapid.Uint64().Draw(t, fmt.Sprint("seed", i))
				messages[i] = randomBytes(rand.New(rand.NewPCG(seed, uint64(n))), n)
			}
			key := (*[KeySize]byte)(rapid.SliceOfN(rapid.Byte(), KeySize, KeySize).Draw(t, "key"))
			check(t, messages, key)
		})
	})
}

// Messages that share one backing array, as a caller's per-batch buffer
// does: the lanes must read only their own bytes.
func TestSum256SharedBuffer(t *testing.T) {
	paths(t, func(t *testing.T) {
		r := rand.New(rand.NewPCG(3, 4))
		buffer := randomBytes(r, 64<<10)
		var messages [][]byte
		for offset := 0; offset < len(buffer)-ChunkSize; {
			n := r.IntN(ChunkSize + 1)
			messages = append(messages, buffer[offset:offset+n:offset+n])
			offset += n
		}
		copyOf := bytes.Clone(buffer)
		check(t, messages, testKey(r))
		if !bytes.Equal(buffer, copyOf) {
			t.Fatal("the messages were modified")
		}
	})
}

func TestSum256ShortOutputPanics(t *testing.T) {
	for name, call := range map[string]func(){
		"Sum256":      func() { Sum256(make([][Size]byte, 1), make([][]byte, 2)) },
		"Sum256Keyed": func() { Sum256Keyed(make([][Size]byte, 1), new([KeySize]byte), make([][]byte, 2)) },
	} {
		t.Run(name, func(t *testing.T) { mustPanic(t, call) })
	}
}

// mustPanic fails t unless call panics.
func mustPanic(t *testing.T, call func()) {
	t.Helper()
	defer func() {
		if recover() == nil {
			t.Fatal("no panic")
		}
	}()
	call()
}

// The lane path hashes without allocating.
func TestSum256DoesNotAllocate(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	messages := make([][]byte, 64)
	for i := range messages {
		messages[i] = randomBytes(r, 370)
	}
	out := make([][Size]byte, len(messages))
	if n := testing.AllocsPerRun(10, func() { Sum256(out, messages) }); n != 0 {
		t.Fatalf("Sum256 allocates %v times per call", n)
	}
}

// FuzzSum256 splits data into messages at the lengths the fuzzer picks and
// compares each hash, unkeyed and keyed, with zeebo/blake3's.
func FuzzSum256(f *testing.F) {
	f.Add([]byte{}, []byte{}, []byte("key"))
	f.Add(bytes.Repeat([]byte{1}, 370*9), []byte{0x72, 0x01, 0x72, 0x01, 0x72, 0x01, 0x72, 0x01, 0x72, 0x01, 0x72, 0x01, 0x72, 0x01, 0x72, 0x01, 0x72, 0x01}, []byte{})
	f.Add(bytes.Repeat([]byte{0xfe}, 5000), []byte{0, 0, 1, 0, 0x40, 0, 0x41, 0, 0, 4, 1, 4, 0xff, 3, 0x3f, 0, 7, 0}, []byte("k"))
	f.Fuzz(func(t *testing.T, data, lengths, keySeed []byte) {
		var messages [][]byte
		for len(lengths) >= 2 && len(messages) < 64 {
			n := int(binary.LittleEndian.Uint16(lengths)) % (ChunkSize + 200)
			lengths = lengths[2:]
			n = min(n, len(data))
			messages = append(messages, data[:n])
			data = data[n:]
		}
		key := blake3.Sum256(keySeed)
		paths(t, func(t *testing.T) { check(t, messages, &key) })
	})
}

// BenchmarkSum256 hashes batches of 370-byte messages (a typical entry's
// hash input) and of 40-byte ones (a one-block message, like a key digest
// element) on each lane width this CPU has, beside zeebo/blake3 one
// message at a time over the same messages in the same iterations; ratio
// is the baseline's time over the batch's.
func BenchmarkSum256(b *testing.B) {
	for _, width := range lanePaths() {
		if width == 0 {
			continue
		}
		for _, length := range []int{370, 40} {
			for _, batch := range []int{8, 64, 256} {
				benchmarkSum256(b, width, length, batch)
			}
		}
	}
}

func benchmarkSum256(b *testing.B, width, length, batch int) {
	r := rand.New(rand.NewPCG(7, uint64(batch)))
	messages := make([][]byte, batch)
	for i := range messages {
		messages[i] = randomBytes(r, length)
	}
	out := make([][Size]byte, batch)
	b.Run(fmt.Sprintf("lanes=%d/bytes=%d/batch=%d", width, length, batch), func(b *testing.B) {
		defer useLaneWidth(width)()
		b.SetBytes(int64(batch * length))
		var (
			baseline         time.Duration
			baselineMessages int
			iteration        int
		)
		// Every 16th iteration also times the baseline over the same
		// messages, with the benchmark's timer stopped: both see the same
		// machine load (this machine is shared), the timer counts the
		// batch alone, and the few stops (each reads the memory
		// statistics) do not disturb the batch's caches every time.
		for b.Loop() {
			Sum256(out, messages)
			if iteration%16 == 0 {
				b.StopTimer()
				start := time.Now()
				for i, m := range messages {
					out[i] = blake3.Sum256(m)
				}
				baseline += time.Since(start)
				baselineMessages += batch
				b.StartTimer()
			}
			iteration++
		}
		reportPerMessage(b, batch, baseline, baselineMessages)
	})
}

// Sum256Blocks hashes each zero-padded block's message as zeebo/blake3
// does, unkeyed and keyed, at every lane width: 0 to 40 messages of 0 to
// 64 bytes (groups of every size, a short last group, empty messages and
// full blocks), leaving the outputs past them and the blocks untouched.
func TestSum256Blocks(t *testing.T) {
	paths(t, func(t *testing.T) {
		rapid.Check(t, func(t *rapid.T) {
			lengths := rapid.SliceOfN(rapid.Uint8Range(0, BlockSize), 0, 40).Draw(t, "lengths")
			seed := rapid.Uint64().Draw(t, "seed")
			r := rand.New(rand.NewPCG(seed, seed))
			blocks := make([]byte, len(lengths)*BlockSize)
			for i, length := range lengths {
				for j := range int(length) {
					blocks[i*BlockSize+j] = byte(r.Uint32())
				}
			}
			saved := bytes.Clone(blocks)
			key := testKey(r)
			sentinel := [Size]byte{0x5a}
			for _, k := range []*[KeySize]byte{nil, key} {
				out := make([][Size]byte, len(lengths)+1)
				out[len(lengths)] = sentinel
				Sum256Blocks(out, k, blocks, lengths)
				for i, length := range lengths {
					message := blocks[i*BlockSize : i*BlockSize+int(length)]
					want := blake3.Sum256(message)
					if k != nil {
						want = zeeboKeyed(k, message)
					}
					if out[i] != want {
						t.Fatalf("message %d of %d (%d bytes, keyed %v): %x, want %x", i, len(lengths), length, k != nil, out[i], want)
					}
				}
				if out[len(lengths)] != sentinel {
					t.Fatal("an output past the messages was written")
				}
			}
			if !bytes.Equal(blocks, saved) {
				t.Fatal("the blocks were written")
			}
		})
	})
}

// Sum256Blocks panics on a message longer than a block and on outputs or
// blocks too short for the lengths.
func TestSum256BlocksPanics(t *testing.T) {
	cases := map[string]func(){
		"long message": func() { Sum256Blocks(make([][Size]byte, 1), nil, make([]byte, BlockSize), []uint8{BlockSize + 1}) },
		"short output": func() { Sum256Blocks(make([][Size]byte, 1), nil, make([]byte, 2*BlockSize), []uint8{1, 2}) },
		"short blocks": func() { Sum256Blocks(make([][Size]byte, 2), nil, make([]byte, BlockSize+1), []uint8{1, 2}) },
	}
	for name, fn := range cases {
		t.Run(name, func(t *testing.T) { mustPanic(t, fn) })
	}
}

// One batch of Sum256Blocks on the lane path allocates nothing once the
// pool holds a lane state (one at a time, a keyed batch makes its hasher).
func TestSum256BlocksDoesNotAllocate(t *testing.T) {
	if !lanePathAvailable() {
		t.Skip("no lane path in this build")
	}
	lengths := make([]uint8, 512)
	for i := range lengths {
		lengths[i] = uint8(i % (BlockSize + 1))
	}
	blocks := make([]byte, len(lengths)*BlockSize)
	out := make([][Size]byte, len(lengths))
	key := new([KeySize]byte)
	Sum256Blocks(out, key, blocks, lengths)
	if n := testing.AllocsPerRun(10, func() { Sum256Blocks(out, key, blocks, lengths) }); n != 0 {
		t.Fatalf("Sum256Blocks allocates %v times per batch", n)
	}
}

// BenchmarkSum256Blocks hashes a verify's one-block messages (a key's
// digest message, 46 bytes; a multiset element, 32 bytes) keyed, laid out
// at the block stride, beside Sum256Keyed over the same messages as
// slices (the lane path with a zero-padded copy of each) in the same run.
func BenchmarkSum256Blocks(b *testing.B) {
	for _, width := range lanePaths() {
		if width == 0 {
			continue
		}
		for _, length := range []int{46, 32} {
			benchmarkSum256Blocks(b, width, length, 512)
		}
	}
}

func benchmarkSum256Blocks(b *testing.B, width, length, batch int) {
	r := rand.New(rand.NewPCG(9, uint64(length)))
	blocks := make([]byte, batch*BlockSize)
	lengths := make([]uint8, batch)
	messages := make([][]byte, batch)
	for i := range lengths {
		lengths[i] = uint8(length)
		copy(blocks[i*BlockSize:], randomBytes(r, length))
		messages[i] = blocks[i*BlockSize : i*BlockSize+length]
	}
	key := testKey(r)
	out := make([][Size]byte, batch)
	b.Run(fmt.Sprintf("lanes=%d/bytes=%d/batch=%d", width, length, batch), func(b *testing.B) {
		defer useLaneWidth(width)()
		var (
			baseline         time.Duration
			baselineMessages int
			iteration        int
		)
		// The baseline is timed every 16th iteration with the timer
		// stopped, as in BenchmarkSum256.
		for b.Loop() {
			Sum256Blocks(out, key, blocks, lengths)
			if iteration%16 == 0 {
				b.StopTimer()
				start := time.Now()
				Sum256Keyed(out, key, messages)
				baseline += time.Since(start)
				baselineMessages += batch
				b.StartTimer()
			}
			iteration++
		}
		reportPerMessage(b, batch, baseline, baselineMessages)
	})
}

// reportPerMessage reports a benchmark's time per message beside its
// baseline's, timed on every 16th iteration, and their ratio.
func reportPerMessage(b *testing.B, batch int, baseline time.Duration, baselineMessages int) {
	perMessage := float64(b.Elapsed().Nanoseconds()) / float64(b.N*batch)
	baselinePerMessage := float64(baseline.Nanoseconds()) / float64(baselineMessages)
	b.ReportMetric(baselinePerMessage/perMessage, "ratio")
	b.ReportMetric(perMessage, "ns/message")
	b.ReportMetric(baselinePerMessage, "baseline-ns/message")
}
