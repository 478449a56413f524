package stockmovement

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/ledgerworks/ledger/chain"
	"github.com/ledgerworks/ledger/decimal"
)

// MovementType is the payload type of every movement entry.
const MovementType = "stock.movement/v1"

// Kind says what a movement entry records.
type Kind uint8

// Movement kinds, as stored in the payload. The values are persisted: never
// renumber them.
const (
	KindReceipt     Kind = 1 // stock received at the location (+)
	KindIssue       Kind = 2 // stock issued from the location (-)
	KindAdjustment  Kind = 3 // a counted correction (±), with a reason
	KindTransferOut Kind = 4 // the source half of a transfer (-)
	KindTransferIn  Kind = 5 // the target half of a transfer (+)
	KindReversal    Kind = 6 // the opposite of an earlier entry of this chain
)

var kindNames = map[Kind]string{
	KindReceipt: "receipt", KindIssue: "issue", KindAdjustment: "adjustment",
	KindTransferOut: "transfer_out", KindTransferIn: "transfer_in", KindReversal: "reversal",
}

// String returns the kind's name as used in JSON and text output.
func (k Kind) String() string {
	if name, ok := kindNames[k]; ok {
		return name
	}
	return fmt.Sprintf("Kind(%d)", uint8(k))
}

// MarshalText makes a Kind print as its name in JSON.
func (k Kind) MarshalText() ([]byte, error) { return []byte(k.String()), nil }

// Movement is the content of one movement entry: the signed change it makes
// to its chain's balance, and the balance after it.
type Movement struct {
	Kind Kind
	// Quantity is the signed change to this location's balance, at the
	// item's scale: positive for receipts and the target half of a
	// transfer, negative for issues and the source half.
	Quantity decimal.Decimal
	// Balance is the running quantity of the item at the location after
	// this entry.
	Balance     decimal.Decimal
	Reference   string // document number
	Note        string // free-form
	Reason      string // adjustments only
	Counterpart string // transfers (and their reversals): the other location
	// OriginalChain and OriginalSeq name the entry a reversal reverses
	// (always an entry of the reversal's own chain); empty and 0 otherwise.
	OriginalChain string
	OriginalSeq   uint64
}

// Layout of stock.movement/v1, all integers big-endian, in this order:
//
//	u8   kind
//	u8   scale
//	i64  quantity units (signed change)
//	u64  original seq (reversals; else 0)
//	str  reference
//	str  note
//	str  reason
//	str  counterpart
//	str  original chain
//	i64  balance units (running quantity after the entry)
//
// where str is a u16 byte length followed by UTF-8 bytes. Everything before
// the balance is the request: a retry encodes the same request bytes, so
// replays are decided on them (see requestPart). The balance is last so that
// the request is a prefix of the payload.
const (
	movementFixedSize = 1 + 1 + 8 + 8
	balanceSize       = 8
	// movementSizeMax bounds a payload: the fixed fields, five strings
	// with their lengths, the balance.
	movementSizeMax = movementFixedSize + 5*2 + ReferenceLengthMax + NoteLengthMax +
		ReasonLengthMax + IDLengthMax + chainNameLengthMax + balanceSize
	chainNameLengthMax = chain.ChainLengthMax
)

// EncodeMovement returns the canonical bytes of m. The same movement always
// encodes to the same bytes. It panics when m is not valid (see
// ValidateMovement): callers validate their input first, so an invalid
// movement here is a bug.
func EncodeMovement(m Movement) []byte {
	if err := ValidateMovement(m); err != nil {
		panic(fmt.Sprintf("stockmovement: encoding an invalid movement: %v", err))
	}
	b := make([]byte, 0, movementFixedSize+balanceSize+10+len(m.Reference)+len(m.Note)+
		len(m.Reason)+len(m.Counterpart)+len(m.OriginalChain))
	b = append(b, byte(m.Kind), m.Quantity.Scale())
	b = binary.BigEndian.AppendUint64(b, uint64(m.Quantity.Units()))
	b = binary.BigEndian.AppendUint64(b, m.OriginalSeq)
	for _, s := range [...]string{m.Reference, m.Note, m.Reason, m.Counterpart, m.OriginalChain} {
		b = binary.BigEndian.AppendUint16(b, uint16(len(s)))
		b = append(b, s...)
	}
	return binary.BigEndian.AppendUint64(b, uint64(m.Balance.Units()))
}

// requestPart returns the bytes of an encoded movement that describe the
// request, without the running balance.
func requestPart(payload []byte) []byte { return payload[:len(payload)-balanceSize] }

// DecodeMovement parses a stock.movement/v1 payload strictly: every field
// must be present and valid for its kind, lengths must be within the limits
// and no byte may follow. Errors match ErrMalformed.
func DecodeMovement(data []byte) (Movement, error) {
	if len(data) > movementSizeMax {
		return Movement{}, malformed("payload of %d bytes exceeds %d", len(data), movementSizeMax)
	}
	if len(data) < movementFixedSize+balanceSize {
		return Movement{}, malformed("payload of %d bytes is shorter than %d", len(data), movementFixedSize+balanceSize)
	}
	kind, scale := Kind(data[0]), data[1]
	if scale > decimal.ScaleMax {
		return Movement{}, malformed("scale %d exceeds %d", scale, decimal.ScaleMax)
	}
	m := Movement{
		Kind:        kind,
		Quantity:    decimal.MustNew(int64(binary.BigEndian.Uint64(data[2:])), scale),
		OriginalSeq: binary.BigEndian.Uint64(data[10:]),
	}
	r := reader{data: data[movementFixedSize : len(data)-balanceSize]}
	for _, field := range [...]*string{&m.Reference, &m.Note, &m.Reason, &m.Counterpart, &m.OriginalChain} {
		*field = r.text()
	}
	if r.err != "" {
		return Movement{}, malformed("%s", r.err)
	}
	if len(r.data) != 0 {
		return Movement{}, malformed("%d bytes after the last field", len(r.data))
	}
	m.Balance = decimal.MustNew(int64(binary.BigEndian.Uint64(data[len(data)-balanceSize:])), scale)
	if err := ValidateMovement(m); err != nil {
		return Movement{}, malformed("%v", err)
	}
	return m, nil
}

// ValidateMovement checks the rules of stock.movement/v1 that hold for every
// entry, whatever the ledger around it: a kind-appropriate sign, the fields
// each kind needs and no others, text within its limits.
func ValidateMovement(m Movement) error {
	q := m.Quantity.Units()
	invalid := func(format string, args ...any) error {
		return newError("movement", ErrMalformed, format, args...)
	}
	if m.Quantity.Scale() != m.Balance.Scale() {
		return invalid("quantity scale %d differs from balance scale %d", m.Quantity.Scale(), m.Balance.Scale())
	}
	if q == 0 || q == math.MinInt64 {
		return invalid("quantity units %d", q)
	}
	texts := [...]struct {
		name      string
		value     string
		lengthMax int
	}{
		{"reference", m.Reference, ReferenceLengthMax}, {"note", m.Note, NoteLengthMax},
		{"reason", m.Reason, ReasonLengthMax}, {"counterpart", m.Counterpart, IDLengthMax},
		{"original chain", m.OriginalChain, chainNameLengthMax},
	}
	for _, t := range texts {
		if len(t.value) > t.lengthMax {
			return invalid("%s of %d bytes exceeds %d", t.name, len(t.value), t.lengthMax)
		}
		if why := checkText(t.value); why != "" {
			return invalid("%s %s", t.name, why)
		}
	}
	if m.Counterpart != "" && validateID(m.Counterpart) != nil {
		return invalid("counterpart %q is not a location id", m.Counterpart)
	}
	wantReason, wantCounterpart, wantOriginal := false, false, false
	switch m.Kind {
	case KindReceipt, KindTransferIn:
		if q < 0 {
			return invalid("%s with negative quantity", m.Kind)
		}
		wantCounterpart = m.Kind == KindTransferIn
	case KindIssue, KindTransferOut:
		if q > 0 {
			return invalid("%s with positive quantity", m.Kind)
		}
		wantCounterpart = m.Kind == KindTransferOut
	case KindAdjustment:
		wantReason = true
	case KindReversal:
		wantOriginal = true
		wantCounterpart = m.Counterpart != "" // set when reversing a transfer half
	default:
		return invalid("unknown kind %d", uint8(m.Kind))
	}
	switch {
	case wantReason != (m.Reason != ""):
		return invalid("%s: reason %q", m.Kind, m.Reason)
	case wantCounterpart != (m.Counterpart != ""):
		return invalid("%s: counterpart %q", m.Kind, m.Counterpart)
	case wantOriginal != (m.OriginalChain != ""), wantOriginal != (m.OriginalSeq != 0):
		return invalid("%s: original %q seq %d", m.Kind, m.OriginalChain, m.OriginalSeq)
	}
	if wantOriginal {
		if _, _, _, ok := ParseMovementChain(m.OriginalChain); !ok {
			return invalid("original chain %q is not a movement chain", m.OriginalChain)
		}
	}
	return nil
}

func malformed(format string, args ...any) error {
	return newError("decode", ErrMalformed, format, args...)
}

// reader takes length-prefixed strings off a byte slice, remembering the
// first problem.
type reader struct {
	data []byte
	err  string
}

func (r *reader) text() string {
	if r.err != "" {
		return ""
	}
	if len(r.data) < 2 {
		r.err = "truncated length"
		return ""
	}
	n := int(binary.BigEndian.Uint16(r.data))
	if len(r.data)-2 < n {
		r.err = fmt.Sprintf("length %d exceeds the %d bytes left", n, len(r.data)-2)
		return ""
	}
	s := string(r.data[2 : 2+n])
	r.data = r.data[2+n:]
	return s
}

func (r *reader) readByte() byte {
	if r.err != "" {
		return 0
	}
	if len(r.data) < 1 {
		r.err = "truncated"
		return 0
	}
	b := r.data[0]
	r.data = r.data[1:]
	return b
}
