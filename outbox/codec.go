package outbox

import (
	"encoding/binary"
	"errors"
	"fmt"
	"unicode/utf8"
)

// The outbox's payloads and state records share one binary encoding: a
// version byte, then fields in a fixed order, integers big-endian and of
// fixed width, strings and byte strings as lp(x) (a 4-byte big-endian
// length, then the bytes), lists as a 4-byte count, then the items. It is
// canonical: a payload decodes only when encoding the result gives the same
// bytes back, so an entry's hash pins exactly one meaning.

const codecVersion = 1

// errDecode is matched by every decoding error.
var errDecode = errors.New("outbox: undecodable payload")

type encoder struct{ b []byte }

// newEncoder and newDecoder return values, not pointers, so that a codec
// call allocates only what it encodes or decodes.
func newEncoder(size int) encoder {
	e := encoder{b: make([]byte, 0, size)}
	e.b = append(e.b, codecVersion)
	return e
}
func (e *encoder) u8(v uint8)     { e.b = append(e.b, v) }
func (e *encoder) u32(v uint32)   { e.b = binary.BigEndian.AppendUint32(e.b, v) }
func (e *encoder) u64(v uint64)   { e.b = binary.BigEndian.AppendUint64(e.b, v) }
func (e *encoder) i64(v int64)    { e.u64(uint64(v)) }
func (e *encoder) str(s string)   { e.u32(uint32(len(s))); e.b = append(e.b, s...) }
func (e *encoder) bytes(p []byte) { e.u32(uint32(len(p))); e.b = append(e.b, p...) }
func (e *encoder) id(id ID)       { e.b = append(e.b, id[:]...) }
func (e *encoder) count(n int)    { e.u32(uint32(n)) }
func (e *encoder) result() []byte { return e.b }
func (d *decoder) remaining() int { return len(d.b) }
func (d *decoder) fail(f string, a ...any) {
	if d.err == nil {
		d.err = fmt.Errorf("%w: %s", errDecode, fmt.Sprintf(f, a...))
	}
}

type decoder struct {
	b   []byte
	err error
}

func newDecoder(b []byte) decoder {
	d := decoder{b: b}
	if len(b) == 0 || b[0] != codecVersion {
		d.fail("unknown version")
		return d
	}
	d.b = b[1:]
	return d
}

func (d *decoder) take(n int) []byte {
	if d.err != nil {
		return nil
	}
	if n < 0 || n > len(d.b) {
		d.fail("truncated")
		return nil
	}
	p := d.b[:n:n]
	d.b = d.b[n:]
	return p
}

func (d *decoder) u8() uint8 {
	if p := d.take(1); p != nil {
		return p[0]
	}
	return 0
}
func (d *decoder) u32() uint32 {
	if p := d.take(4); p != nil {
		return binary.BigEndian.Uint32(p)
	}
	return 0
}
func (d *decoder) u64() uint64 {
	if p := d.take(8); p != nil {
		return binary.BigEndian.Uint64(p)
	}
	return 0
}
func (d *decoder) i64() int64 { return int64(d.u64()) }

// bytes reads a byte string of at most max bytes; the result aliases the
// input.
func (d *decoder) bytes(max int) []byte {
	n := d.u32()
	if d.err == nil && int64(n) > int64(max) {
		d.fail("field of %d bytes, at most %d", n, max)
		return nil
	}
	return d.take(int(n))
}

func (d *decoder) str(max int) string {
	p := d.bytes(max)
	if d.err == nil && !utf8.Valid(p) {
		d.fail("text is not UTF-8")
	}
	return string(p)
}

func (d *decoder) id() ID {
	var id ID
	copy(id[:], d.take(IDSize))
	return id
}

// count reads a list length of at most max items, each at least minSize
// bytes long (so a short input cannot claim a huge list).
func (d *decoder) count(max, minSize int) int {
	n := d.u32()
	if d.err == nil && (int64(n) > int64(max) || int64(n)*int64(minSize) > int64(len(d.b))) {
		d.fail("list of %d items", n)
		return 0
	}
	return int(n)
}

func (d *decoder) end() error {
	if d.err == nil && len(d.b) != 0 {
		d.fail("%d bytes after the end", len(d.b))
	}
	return d.err
}
