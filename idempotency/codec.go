package idempotency

import (
	"encoding/binary"
	"errors"
	"net/http"
	"time"
)

// recordVersion is the first byte of an encoded record.
const recordVersion = 1

var errBadRecord = errors.New("idempotency: malformed stored record")

var statusCodes = map[Status]byte{StatusProcessing: 1, StatusSuccess: 2, StatusFailed: 3}

// encodeRecord appends the binary form of r to b: version, status, hash,
// attempt, four times, token, failure and the response, with 4-byte
// big-endian lengths (2-byte for header counts).
func encodeRecord(b []byte, r *Record) []byte {
	b = append(b, recordVersion, statusCodes[r.Status])
	b = append(b, r.RequestHash[:]...)
	b = binary.BigEndian.AppendUint32(b, uint32(r.Attempt))
	b = binary.BigEndian.AppendUint64(b, uint64(r.CreatedAt.UnixNano()))
	b = binary.BigEndian.AppendUint64(b, uint64(r.UpdatedAt.UnixNano()))
	b = binary.BigEndian.AppendUint64(b, uint64(r.LeaseExpiresAt.UnixNano()))
	b = binary.BigEndian.AppendUint64(b, uint64(r.ExpiresAt.UnixNano()))
	b = appendLP(b, r.Token)
	b = appendLP(b, r.Failure)
	if r.Response == nil {
		return append(b, 0)
	}
	b = append(b, 1)
	b = binary.BigEndian.AppendUint16(b, uint16(r.Response.Status))
	b = binary.BigEndian.AppendUint16(b, uint16(len(r.Response.Header)))
	for k, vs := range r.Response.Header {
		b = appendLP(b, k)
		b = binary.BigEndian.AppendUint16(b, uint16(len(vs)))
		for _, v := range vs {
			b = appendLP(b, v)
		}
	}
	b = binary.BigEndian.AppendUint32(b, uint32(len(r.Response.Body)))
	return append(b, r.Response.Body...)
}

// encodedRecordLen is the length of encodeRecord's form of r.
func encodedRecordLen(r *Record) int {
	n := 2 + 32 + 4 + 4*8 + 4 + len(r.Token) + 4 + len(r.Failure) + 1
	if r.Response == nil {
		return n
	}
	n += 2 + 2 + 4 + len(r.Response.Body)
	for k, vs := range r.Response.Header {
		n += 4 + len(k) + 2
		for _, v := range vs {
			n += 4 + len(v)
		}
	}
	return n
}

func appendLP(b []byte, s string) []byte {
	b = binary.BigEndian.AppendUint32(b, uint32(len(s)))
	return append(b, s...)
}

// recordExpiryEnd is where ExpiresAt ends in an encoded record (version,
// status, hash, attempt, three times before it).
const recordExpiryEnd = 2 + 32 + 4 + 4*8

// recordExpiry reads ExpiresAt from an encoded record of at least
// recordExpiryEnd bytes without decoding the rest.
func recordExpiry(b []byte) time.Time {
	return time.Unix(0, int64(binary.BigEndian.Uint64(b[recordExpiryEnd-8:recordExpiryEnd])))
}

// recordHeldBy reports whether an encoded record has the status and the
// token, without decoding the rest.
func recordHeldBy(b []byte, status Status, token string) bool {
	const tokenAt = recordExpiryEnd // the token follows the times
	if len(b) < tokenAt+4 || b[0] != recordVersion || b[1] != statusCodes[status] {
		return false
	}
	n := int(binary.BigEndian.Uint32(b[tokenAt:]))
	return len(b)-tokenAt-4 >= n && string(b[tokenAt+4:tokenAt+4+n]) == token
}

// decoder reads an encoded record; the first error sticks. Its strings
// are slices of one copy of the record (s), so that a record's names and
// values cost one allocation.
type decoder struct {
	b   []byte
	s   string // b as a string
	off int
	bad bool
}

func (d *decoder) take(n int) []byte {
	if d.bad || n < 0 || len(d.b)-d.off < n {
		d.bad = true
		return nil
	}
	v := d.b[d.off : d.off+n : d.off+n]
	d.off += n
	return v
}

func (d *decoder) u16() int {
	v := d.take(2)
	if v == nil {
		return 0
	}
	return int(binary.BigEndian.Uint16(v))
}

func (d *decoder) u32() uint32 {
	v := d.take(4)
	if v == nil {
		return 0
	}
	return binary.BigEndian.Uint32(v)
}

func (d *decoder) time() time.Time {
	v := d.take(8)
	if v == nil {
		return time.Time{}
	}
	return time.Unix(0, int64(binary.BigEndian.Uint64(v))).UTC()
}

func (d *decoder) str() string {
	n := d.u32()
	if d.bad || n > uint32(len(d.b)-d.off) {
		d.bad = true
		return ""
	}
	v := d.s[d.off : d.off+int(n)]
	d.off += int(n)
	return v
}

// decodeRecord decodes a record of scope from b.
func decodeRecord(scope Scope, b []byte) (Record, error) {
	d := decoder{b: b, s: string(b)}
	head := d.take(2)
	if head == nil || head[0] != recordVersion {
		return Record{}, errBadRecord
	}
	r := Record{Scope: scope}
	switch head[1] {
	case statusCodes[StatusProcessing]:
		r.Status = StatusProcessing
	case statusCodes[StatusSuccess]:
		r.Status = StatusSuccess
	case statusCodes[StatusFailed]:
		r.Status = StatusFailed
	default:
		return Record{}, errBadRecord
	}
	copy(r.RequestHash[:], d.take(32))
	r.Attempt = int(d.u32())
	r.CreatedAt, r.UpdatedAt, r.LeaseExpiresAt, r.ExpiresAt = d.time(), d.time(), d.time(), d.time()
	r.Token = d.str()
	r.Failure = d.str()
	if has := d.take(1); has != nil && has[0] == 1 {
		resp := &Response{Status: d.u16()}
		n := d.u16()
		resp.Header = make(http.Header, min(n, 64))
		for i := 0; i < n && !d.bad; i++ {
			k := d.str()
			m := d.u16()
			vs := resp.Header[k]
			if vs == nil && m <= len(d.b)-d.off {
				vs = make([]string, 0, m)
			}
			for j := 0; j < m && !d.bad; j++ {
				vs = append(vs, d.str())
			}
			if m > 0 {
				resp.Header[k] = vs
			}
		}
		resp.Body = []byte(d.str())
		r.Response = resp
	}
	if d.bad || d.off != len(d.b) {
		return Record{}, errBadRecord
	}
	return r, nil
}

// scopeBytes appends the scope's key form to b: the three names separated
// by 0x00, which no name holds, so that keys sort as scopes do.
func scopeBytes(b []byte, s Scope) []byte {
	b = append(b, s.Operation...)
	b = append(b, 0)
	b = append(b, s.User...)
	b = append(b, 0)
	return append(b, s.Key...)
}

// parseScope is the inverse of scopeBytes.
func parseScope(b []byte) (Scope, bool) {
	var parts [3]string
	i := 0
	start := 0
	for j, c := range b {
		if c == 0 {
			if i == 2 {
				return Scope{}, false
			}
			parts[i] = string(b[start:j])
			i, start = i+1, j+1
		}
	}
	if i != 2 {
		return Scope{}, false
	}
	parts[2] = string(b[start:])
	return Scope{Operation: parts[0], User: parts[1], Key: parts[2]}, true
}
