package financial

import (
	"encoding/binary"
	"errors"
	"math"

	"github.com/ledgerworks/ledger/decimal"
)

// Payload types of the journal. Each names a version of its codec; a new
// layout gets a new type and the old decoder stays.
const (
	TypeAccount      = "fin.account/v1"
	TypeAccountClose = "fin.account.close/v1"
	TypeCurrency     = "fin.currency/v1"
	TypePosting      = "fin.posting/v1"
)

// The codecs are binary, big-endian, and have exactly one encoding per
// value: strings are a uint16 length and their bytes, integers have a fixed
// size, and the decoders refuse anything the encoders would not write
// (values outside the limits, unknown enum values, trailing bytes). So the
// same request always encodes to the same bytes and fingerprints the same,
// and decode(b) succeeding implies encode(decode(b)) == b.
//
//	fin.account/v1        code, name, type u8, normal side u8
//	fin.account.close/v1  code
//	fin.currency/v1       code, exponent u8
//	fin.posting/v1        date i32, reverses u64, memo, reference, count u16,
//	                      count × (account, side u8, currency, scale u8, units u64)

// EncodeAccount encodes a normalized account definition.
func EncodeAccount(a *Account) []byte {
	b := make([]byte, 0, 2+len(a.Code)+2+len(a.Name)+2)
	b = appendString(b, a.Code)
	b = appendString(b, a.Name)
	return append(b, byte(a.Type), byte(a.NormalSide))
}

// DecodeAccount decodes a fin.account/v1 payload.
func DecodeAccount(payload []byte) (Account, error) {
	r := reader{data: payload}
	a := Account{Code: r.string(), Name: r.string(), Type: AccountType(r.byte()), NormalSide: Side(r.byte())}
	if err := r.finish(TypeAccount); err != nil {
		return Account{}, err
	}
	if a.NormalSide == 0 { // the encoder always writes the side it normalized
		return Account{}, corrupt("%s: normal side 0", TypeAccount)
	}
	if err := a.normalize(); err != nil {
		return Account{}, decodeFailure(TypeAccount, err)
	}
	return a, nil
}

// EncodeAccountClose encodes the closing of an account.
func EncodeAccountClose(code string) []byte { return appendString(nil, code) }

// DecodeAccountClose decodes a fin.account.close/v1 payload.
func DecodeAccountClose(payload []byte) (string, error) {
	r := reader{data: payload}
	code := r.string()
	if err := r.finish(TypeAccountClose); err != nil {
		return "", err
	}
	if err := validateAccountCode(code); err != nil {
		return "", decodeFailure(TypeAccountClose, err)
	}
	return code, nil
}

// EncodeCurrency encodes a currency definition.
func EncodeCurrency(c *Currency) []byte {
	return append(appendString(nil, c.Code), c.Exponent)
}

// DecodeCurrency decodes a fin.currency/v1 payload.
func DecodeCurrency(payload []byte) (Currency, error) {
	r := reader{data: payload}
	c := Currency{Code: r.string(), Exponent: r.byte()}
	if err := r.finish(TypeCurrency); err != nil {
		return Currency{}, err
	}
	if err := c.validate(); err != nil {
		return Currency{}, decodeFailure(TypeCurrency, err)
	}
	return c, nil
}

// EncodePosting encodes a posting without its key (the journal entry
// carries the key).
func EncodePosting(p *Posting) []byte {
	size := 4 + 8 + 2 + len(p.Memo) + 2 + len(p.Reference) + 2
	for _, l := range p.Lines {
		size += 2 + len(l.Account) + 1 + 2 + len(l.Currency) + 1 + 8
	}
	b := make([]byte, 0, size)
	b = binary.BigEndian.AppendUint32(b, uint32(p.Date))
	b = binary.BigEndian.AppendUint64(b, p.Reverses)
	b = appendString(b, p.Memo)
	b = appendString(b, p.Reference)
	b = binary.BigEndian.AppendUint16(b, uint16(len(p.Lines)))
	for _, l := range p.Lines {
		b = appendString(b, l.Account)
		b = append(b, byte(l.Side))
		b = appendString(b, l.Currency)
		b = append(b, l.Amount.Scale())
		b = binary.BigEndian.AppendUint64(b, uint64(l.Amount.Units()))
	}
	return b
}

// DecodePosting decodes a fin.posting/v1 payload. The result passes every
// check Post makes without stored state: limits, positive amounts, and the
// balance per currency.
func DecodePosting(payload []byte) (Posting, error) {
	r := reader{data: payload}
	p := Posting{Date: Date(int32(r.uint32())), Reverses: r.uint64(), Memo: r.string(), Reference: r.string()}
	count := int(r.uint16())
	if count > LinesMax {
		return Posting{}, corrupt("%s: %d lines exceed %d", TypePosting, count, LinesMax)
	}
	p.Lines = make([]Line, 0, count)
	for range count {
		l := Line{Account: r.string(), Side: Side(r.byte()), Currency: r.string()}
		scale, units := r.byte(), r.uint64()
		if r.failed {
			break
		}
		if scale > decimal.ScaleMax || units > math.MaxInt64 {
			return Posting{}, corrupt("%s: amount %d at scale %d out of range", TypePosting, units, scale)
		}
		l.Amount = decimal.MustNew(int64(units), scale)
		p.Lines = append(p.Lines, l)
	}
	if err := r.finish(TypePosting); err != nil {
		return Posting{}, err
	}
	if err := p.validateShape(false); err != nil {
		return Posting{}, decodeFailure(TypePosting, err)
	}
	return p, nil
}

func decodeFailure(typ string, err error) error {
	var e *Error
	if errors.As(err, &e) {
		return &Error{Err: ErrPayload, Class: corruptClass, Line: e.Line, Detail: typ + ": " + e.Detail, Cause: e.Err}
	}
	return corrupt("%s: %v", typ, err)
}

func appendString(b []byte, s string) []byte {
	if len(s) > math.MaxUint16 {
		panic("financial: string longer than a payload field can hold") // limits are checked first
	}
	b = binary.BigEndian.AppendUint16(b, uint16(len(s)))
	return append(b, s...)
}

// reader decodes fixed fields from a payload; after the first short read
// every field reads as zero and finish reports it.
type reader struct {
	data   []byte
	failed bool
}

func (r *reader) take(n int) []byte {
	if r.failed || len(r.data) < n {
		r.failed = true
		return nil
	}
	b := r.data[:n]
	r.data = r.data[n:]
	return b
}

func (r *reader) byte() byte {
	if b := r.take(1); b != nil {
		return b[0]
	}
	return 0
}

func (r *reader) uint16() uint16 {
	if b := r.take(2); b != nil {
		return binary.BigEndian.Uint16(b)
	}
	return 0
}

func (r *reader) uint32() uint32 {
	if b := r.take(4); b != nil {
		return binary.BigEndian.Uint32(b)
	}
	return 0
}

func (r *reader) uint64() uint64 {
	if b := r.take(8); b != nil {
		return binary.BigEndian.Uint64(b)
	}
	return 0
}

func (r *reader) string() string {
	n := int(r.uint16())
	return string(r.take(n))
}

func (r *reader) finish(typ string) error {
	switch {
	case r.failed:
		return corrupt("%s: payload ends early", typ)
	case len(r.data) > 0:
		return corrupt("%s: %d bytes after the payload", typ, len(r.data))
	}
	return nil
}
