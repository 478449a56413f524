package apikey

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// The payloads of the system chain and the state records share one binary
// encoding: a version byte, then fields in a fixed order, integers
// big-endian and of fixed width, strings as lp(x) (a 4-byte big-endian
// length, then the bytes), the scopes as a one-byte count then lp(scope)
// each, the digest as its 32 bytes. It is canonical: a payload decodes only
// when encoding the result gives the same bytes back, so an entry's hash
// pins exactly one meaning.

const codecVersion = 1

// errDecode is matched by every decoding error.
var errDecode = errors.New("apikey: undecodable payload")

// createPayload is the payload of a TypeCreate entry.
type createPayload struct {
	ID     string
	Tenant string
	Name   string
	Scopes []Scope
	Digest Digest
}

// revokePayload is the payload of a TypeRevoke entry.
type revokePayload struct {
	ID     string
	Reason string
}

// record is a key's derived state: its public record and digest.
type record struct {
	Key    Key
	Digest Digest
}

type encoder struct{ b []byte }

func newEncoder(size int) *encoder {
	e := &encoder{b: make([]byte, 0, size)}
	e.b = append(e.b, codecVersion)
	return e
}

func (e *encoder) str(s string) {
	e.b = binary.BigEndian.AppendUint32(e.b, uint32(len(s)))
	e.b = append(e.b, s...)
}
func (e *encoder) i64(v int64) { e.b = binary.BigEndian.AppendUint64(e.b, uint64(v)) }
func (e *encoder) scopes(scopes []Scope) {
	e.b = append(e.b, byte(len(scopes)))
	for _, s := range scopes {
		e.str(string(s))
	}
}
func (e *encoder) digest(d Digest) { e.b = append(e.b, d[:]...) }

type decoder struct {
	b   []byte
	err error
}

func newDecoder(b []byte) *decoder {
	d := &decoder{b: b}
	if len(b) == 0 || b[0] != codecVersion {
		d.fail("unknown version")
		return d
	}
	d.b = b[1:]
	return d
}

func (d *decoder) fail(format string, args ...any) {
	if d.err == nil {
		d.err = fmt.Errorf("%w: %s", errDecode, fmt.Sprintf(format, args...))
	}
}

func (d *decoder) take(n int) []byte {
	if d.err != nil {
		return nil
	}
	if n < 0 || n > len(d.b) {
		d.fail("truncated")
		return nil
	}
	out := d.b[:n]
	d.b = d.b[n:]
	return out
}

func (d *decoder) str(lengthMax int) string {
	n := d.take(4)
	if n == nil {
		return ""
	}
	size := binary.BigEndian.Uint32(n)
	if size > uint32(lengthMax) {
		d.fail("string of %d bytes exceeds %d", size, lengthMax)
		return ""
	}
	return string(d.take(int(size)))
}

func (d *decoder) i64() int64 {
	b := d.take(8)
	if b == nil {
		return 0
	}
	return int64(binary.BigEndian.Uint64(b))
}

func (d *decoder) scopes() []Scope {
	n := d.take(1)
	if n == nil {
		return nil
	}
	if int(n[0]) > len(scopeOrder) {
		d.fail("%d scopes", n[0])
		return nil
	}
	scopes := make([]Scope, n[0])
	for i := range scopes {
		scopes[i] = Scope(d.str(len(ScopeAdmin)))
	}
	return scopes
}

func (d *decoder) digest() Digest {
	var out Digest
	copy(out[:], d.take(DigestSize))
	return out
}

// finish fails on trailing bytes and returns the error.
func (d *decoder) finish() error {
	if d.err == nil && len(d.b) != 0 {
		d.fail("%d trailing bytes", len(d.b))
	}
	return d.err
}

// keyFields are the fields a creation and a state record share, in their
// order: id, tenant, name, scopes, digest.
func (e *encoder) keyFields(p *createPayload) {
	e.str(p.ID)
	e.str(p.Tenant)
	e.str(p.Name)
	e.scopes(p.Scopes)
	e.digest(p.Digest)
}

func (d *decoder) keyFields() createPayload {
	var p createPayload
	p.ID = d.str(KeyIDLength)
	p.Tenant = d.str(TenantLengthMax)
	p.Name = d.str(NameLengthMax)
	p.Scopes = d.scopes()
	p.Digest = d.digest()
	return p
}

// createSizeMax bounds the encoding of a creation's fields (scopes are at
// most three of at most five bytes).
func createSizeMax(p *createPayload) int {
	return 1 + 3*4 + len(p.ID) + len(p.Tenant) + len(p.Name) + 1 + 3*(4+5) + DigestSize
}

func encodeCreate(p *createPayload) []byte {
	e := newEncoder(createSizeMax(p))
	e.keyFields(p)
	return e.b
}

// decodeCreate decodes and checks a TypeCreate payload: every field obeys
// the rules Create checks on entry.
func decodeCreate(b []byte) (createPayload, error) {
	d := newDecoder(b)
	p := d.keyFields()
	if err := d.finish(); err != nil {
		return p, err
	}
	if err := checkCreate(p.ID, p.Tenant, p.Name, p.Scopes); err != nil {
		return p, fmt.Errorf("%w: %v", errDecode, err)
	}
	return p, nil
}

// checkCreate checks the fields of a creation; scopes must already be in
// canonical order.
func checkCreate(id, tenant, name string, scopes []Scope) error {
	if err := ValidateID(id); err != nil {
		return err
	}
	if err := ValidateTenant(tenant); err != nil {
		return err
	}
	if err := validateName(name); err != nil {
		return err
	}
	canonical, err := normalizeScopes(scopes)
	if err != nil {
		return err
	}
	if len(canonical) != len(scopes) || !equalScopes(canonical, scopes) {
		return invalid("scopes", ErrInvalidScope, "scopes %v not in canonical order", scopes)
	}
	return nil
}

func equalScopes(a, b []Scope) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func encodeRevoke(p *revokePayload) []byte {
	e := newEncoder(1 + 8 + len(p.ID) + len(p.Reason))
	e.str(p.ID)
	e.str(p.Reason)
	return e.b
}

// decodeRevoke decodes and checks a TypeRevoke payload.
func decodeRevoke(b []byte) (revokePayload, error) {
	d := newDecoder(b)
	var p revokePayload
	p.ID = d.str(KeyIDLength)
	p.Reason = d.str(ReasonLengthMax)
	if err := d.finish(); err != nil {
		return p, err
	}
	if err := ValidateID(p.ID); err != nil {
		return p, fmt.Errorf("%w: %v", errDecode, err)
	}
	if err := validateReason(p.Reason); err != nil {
		return p, fmt.Errorf("%w: %v", errDecode, err)
	}
	return p, nil
}

// encodeRecord encodes a key's state record: the creation's fields, then
// the creation and revocation times and the revocation's reason.
func encodeRecord(r *record) []byte {
	k := &r.Key
	p := createPayload{ID: k.ID, Tenant: k.Tenant, Name: k.Name, Scopes: k.Scopes, Digest: r.Digest}
	e := newEncoder(createSizeMax(&p) + 2*8 + 4 + len(k.RevokedReason))
	e.keyFields(&p)
	e.i64(k.CreatedUnixNano)
	e.i64(k.RevokedUnixNano)
	e.str(k.RevokedReason)
	return e.b
}

// decodeRecord decodes and checks a key's state record.
func decodeRecord(b []byte) (record, error) {
	d := newDecoder(b)
	p := d.keyFields()
	r := record{Key: Key{ID: p.ID, Tenant: p.Tenant, Name: p.Name, Scopes: p.Scopes}, Digest: p.Digest}
	r.Key.CreatedUnixNano = d.i64()
	r.Key.RevokedUnixNano = d.i64()
	r.Key.RevokedReason = d.str(ReasonLengthMax)
	if err := d.finish(); err != nil {
		return r, err
	}
	if err := checkCreate(p.ID, p.Tenant, p.Name, p.Scopes); err != nil {
		return r, fmt.Errorf("%w: %v", errDecode, err)
	}
	if err := validateReason(r.Key.RevokedReason); err != nil {
		return r, fmt.Errorf("%w: %v", errDecode, err)
	}
	return r, nil
}
