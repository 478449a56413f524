// Package workload holds the measured workloads of the performance figures
// (docs/PERFORMANCE.md), each beside the raw bbolt baseline that writes or
// reads the same bytes. The bench command prints them as one table; the
// benchmarks of package chain run them under testing.B.
package workload

import (
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"slices"
	"time"

	"github.com/ledgerworks/ledger/chain"
)

// Shape of the entries every workload writes.
const (
	// PayloadSize is the payload of every entry, in bytes.
	PayloadSize = 200
	// KeySize is the length of every idempotency key: 16 random bytes as
	// 32 hex digits (keys must be UTF-8 without control characters).
	KeySize = 32
	// EntryType is the payload type of every entry.
	EntryType = "bench.entry/v1"
	// BatchSize is how many appends one Update carries in P1.
	BatchSize = 1000
)

// Key returns the idempotency key of entry i of a stream: 32 hex digits of
// two splitmix64 outputs, so keys are uniformly random yet reproducible
// without being stored.
func Key(stream, i uint64) string {
	var b [16]byte
	binary.BigEndian.PutUint64(b[:8], splitmix64(stream<<40^i))
	binary.BigEndian.PutUint64(b[8:], splitmix64(^(stream<<40 ^ i)))
	return hex.EncodeToString(b[:])
}

// Payload returns the payload of entry i: PayloadSize pseudo-random bytes
// that start with i, so every entry's payload differs.
func Payload(i uint64) []byte { return payloadInto(make([]byte, PayloadSize), i) }

// payloadInto writes the payload of entry i into p, PayloadSize bytes, and
// returns it: a caller that appends the same request again (a replay) may
// reuse its buffer, since the engine keeps no reference to a request's
// payload.
func payloadInto(p []byte, i uint64) []byte {
	p = p[:PayloadSize]
	binary.BigEndian.PutUint64(p, i)
	x := i
	for o := 8; o+8 <= len(p); o += 8 {
		x = splitmix64(x)
		binary.BigEndian.PutUint64(p[o:], x)
	}
	return p
}

// Request is entry i of a stream on one chain.
func Request(chainID string, stream, i uint64) chain.Request {
	return chain.Request{Chain: chainID, IdempotencyKey: Key(stream, i), Type: EntryType, Payload: Payload(i)}
}

// Record returns the bytes the engine stores for entry i of a chain (the
// same size and shape), for the raw baselines.
func Record(chainID string, stream, i uint64) []byte {
	req := Request(chainID, stream, i)
	e := chain.Entry{Chain: chainID, Seq: i + 1, TimeUnixNano: time.Now().UnixNano(),
		IdempotencyKey: req.IdempotencyKey, Type: req.Type, Payload: req.Payload}
	e.Hash = e.ComputeHash()
	return chain.EncodeRecord(&e)
}

// LogicalSize is the bytes of one entry's payload and fixed fields: seq,
// time, prev_hash, hash, idempotency key and type. P7 compares the file
// with it.
func LogicalSize() int64 { return PayloadSize + 8 + 8 + 32 + 32 + KeySize + int64(len(EntryType)) }

func splitmix64(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}

// Rate is a count over a duration.
type Rate struct {
	Count    int64
	Duration time.Duration
}

// PerSecond is the rate in items per second.
func (r Rate) PerSecond() float64 {
	if r.Duration <= 0 {
		return 0
	}
	return float64(r.Count) / r.Duration.Seconds()
}

func (r Rate) String() string { return fmt.Sprintf("%.0f/s", r.PerSecond()) }

// Stream is the outcome of a long write: the overall rate and the rates of
// its first and last tenth.
type Stream struct {
	Total, First, Last Rate
	// Tenths are the rates of each tenth of the stream in order (at batch
	// granularity: a tenth ends with the batch that crosses its end).
	Tenths [10]Rate
}

// streamClock turns per-batch timings into a Stream.
type streamClock struct {
	total   int64
	start   time.Time
	done    int64
	firstAt time.Duration
	lastAt  time.Duration // time when the last tenth started
	lastSet bool
	// marks are the items done and the time when each tenth ended.
	marks []streamMark
}

type streamMark struct {
	done int64
	at   time.Duration
}

func newStreamClock(total int64) *streamClock {
	return &streamClock{total: total, start: time.Now()}
}

// advance records that n more items are done.
func (c *streamClock) advance(n int64) {
	c.done += n
	elapsed := time.Since(c.start)
	tenth := c.total / 10
	if c.firstAt == 0 && c.done >= tenth {
		c.firstAt = elapsed
	}
	if !c.lastSet && c.done >= c.total-tenth {
		c.lastAt, c.lastSet = elapsed, true
	}
	for len(c.marks) < 9 && c.done >= tenth*int64(len(c.marks)+1) {
		c.marks = append(c.marks, streamMark{c.done, elapsed})
	}
}

func (c *streamClock) result() Stream {
	elapsed := time.Since(c.start)
	tenth := c.total / 10
	s := Stream{
		Total: Rate{c.done, elapsed},
		First: Rate{tenth, c.firstAt},
		Last:  Rate{c.done - (c.total - tenth), elapsed - c.lastAt},
	}
	prev := streamMark{}
	for i, m := range append(c.marks, streamMark{c.done, elapsed}) {
		if i < len(s.Tenths) {
			s.Tenths[i] = Rate{m.done - prev.done, m.at - prev.at}
		}
		prev = m
	}
	return s
}

// Latencies summarizes per-operation durations.
type Latencies struct {
	P50, P99 time.Duration
	Rate     Rate
}

func summarize(ds []time.Duration, total time.Duration) Latencies {
	slices.Sort(ds)
	if len(ds) == 0 {
		return Latencies{}
	}
	return Latencies{P50: ds[len(ds)/2], P99: ds[len(ds)*99/100], Rate: Rate{int64(len(ds)), total}}
}
