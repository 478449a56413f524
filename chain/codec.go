package chain

import (
	"encoding/binary"
	"fmt"
)

// recordVersion is the first byte of every stored entry.
const recordVersion = 1

// recordFixedSize is the size of a stored entry without its variable fields:
// version, time, prev_hash, hash and three 4-byte lengths.
const recordFixedSize = 1 + 8 + HashSize + HashSize + 3*4

// EncodeRecord returns the bytes stored for e. The chain and seq are not
// stored in the record: the storage key holds them, and the hash covers
// them, so a record moved to another position no longer verifies.
//
//	u8 version=1 | i64be time | prev_hash | hash | lp(key) | lp(type) | lp(payload)
func EncodeRecord(e *Entry) []byte {
	return appendRecord(make([]byte, 0, recordSize(e)), e)
}

// recordSize is the length of EncodeRecord(e).
func recordSize(e *Entry) int {
	return recordFixedSize + len(e.IdempotencyKey) + len(e.Type) + len(e.Payload)
}

// appendRecord appends EncodeRecord(e) to b.
func appendRecord(b []byte, e *Entry) []byte {
	b = append(b, recordVersion)
	b = binary.BigEndian.AppendUint64(b, uint64(e.TimeUnixNano))
	b = append(b, e.PrevHash[:]...)
	b = append(b, e.Hash[:]...)
	b = appendLengthPrefixed(b, []byte(e.IdempotencyKey))
	b = appendLengthPrefixed(b, []byte(e.Type))
	b = appendLengthPrefixed(b, e.Payload)
	return b
}

func appendLengthPrefixed(b, field []byte) []byte {
	b = binary.BigEndian.AppendUint32(b, uint32(len(field)))
	return append(b, field...)
}

// RecordKey returns the idempotency key held in a stored entry, aliasing
// data, without decoding the rest; ok is false when data does not begin as
// a record does or its key is empty. A storage backend that keeps entries
// as opaque bytes uses it to confirm that an entry is a key's (see
// bolt.Options.EntryKey); the key is compared, not validated.
func RecordKey(data []byte) (key []byte, ok bool) {
	if len(data) < recordFixedSize || data[0] != recordVersion {
		return nil, false
	}
	rest := data[recordFieldsOffset:]
	n := binary.BigEndian.Uint32(rest)
	if n == 0 || uint64(n) > IdempotencyKeyLengthMax || uint64(n) > uint64(len(rest)-4) {
		return nil, false
	}
	return rest[4 : 4+n], true
}

// DecodeRecord decodes stored bytes into the entry at (chain, seq). It checks
// the shape and the limits, not the hash: that is Verify's job. The entry
// does not alias data.
func DecodeRecord(chain string, seq uint64, data []byte) (Entry, error) {
	fail := func(format string, args ...any) (Entry, error) {
		return Entry{}, &DecodeError{Chain: chain, Seq: seq, Reason: fmt.Sprintf(format, args...)}
	}
	if len(data) < recordFixedSize {
		return fail("record of %d bytes is shorter than %d", len(data), recordFixedSize)
	}
	if data[0] != recordVersion {
		return fail("record version %d, want %d", data[0], recordVersion)
	}
	e := Entry{Chain: chain, Seq: seq}
	e.TimeUnixNano = int64(binary.BigEndian.Uint64(data[1:9]))
	copy(e.PrevHash[:], data[9:41])
	copy(e.Hash[:], data[41:73])
	rest := data[73:]
	var fields [3][]byte
	limits := [3]int{IdempotencyKeyLengthMax, TypeLengthMax, PayloadSizeLimit}
	names := [3]string{"idempotency key", "type", "payload"}
	for i := range fields {
		if len(rest) < 4 {
			return fail("%s length is cut off", names[i])
		}
		n := binary.BigEndian.Uint32(rest)
		rest = rest[4:]
		if uint64(n) > uint64(limits[i]) || uint64(n) > uint64(len(rest)) {
			return fail("%s length %d exceeds its limit or the record", names[i], n)
		}
		fields[i], rest = rest[:n], rest[n:]
	}
	if len(rest) != 0 {
		return fail("%d bytes after the payload", len(rest))
	}
	e.IdempotencyKey = string(fields[0])
	e.Type = string(fields[1])
	e.Payload = append([]byte(nil), fields[2]...)
	if err := validateText("idempotency_key", e.IdempotencyKey, 0, IdempotencyKeyLengthMax, ErrInvalidKey); err != nil {
		return fail("%v", err)
	}
	if err := validateText("type", e.Type, 1, TypeLengthMax, ErrInvalidType); err != nil {
		return fail("%v", err)
	}
	return e, nil
}

// Where decodeFields finds the fixed fields of a stored entry, and where
// its key, type and payload begin, each with its 4-byte length.
const (
	recordTimeOffset     = 1
	recordPrevHashOffset = recordTimeOffset + 8
	recordHashOffset     = recordPrevHashOffset + HashSize
	recordFieldsOffset   = recordHashOffset + HashSize
)

// appendRecordHashInput appends the Format v1 hash input of a stored entry
// that decodeFields accepted: what appendHashInput appends for its fields,
// in fewer copies. A record holds key, type and payload as lp(key) ||
// lp(type) || lp(payload), exactly the end of the hash input, and its time
// big-endian like the input: those are copied as they are stored.
func appendRecordHashInput(buf []byte, chain string, seq uint64, data []byte) []byte {
	buf = append(buf, domainEntry...)
	buf = append(buf, 0)
	buf = binary.BigEndian.AppendUint64(buf, seq)
	buf = append(buf, data[recordPrevHashOffset:recordHashOffset]...)
	buf = append(buf, data[recordTimeOffset:recordPrevHashOffset]...)
	buf = binary.BigEndian.AppendUint32(buf, uint32(len(chain)))
	buf = append(buf, chain...)
	return append(buf, data[recordFieldsOffset:]...)
}

// recordHashHeaderSize is the size of the part of a stored entry's hash
// input that appendRecordHashInput builds: the rest, lp(key) || lp(type) ||
// lp(payload), is the record's bytes from recordFieldsOffset.
func recordHashHeaderSize(chain string) int {
	return len(domainEntry) + 1 + 8 + HashSize + 8 + 4 + len(chain)
}

// validRecord reports whether decodeFields accepts data, without building
// its fields: the check of every record a verify hashes in a batch, where
// building and returning recordFields (zeroing it, copying both hashes)
// was a third of the decoding. The three lengths are followed as offsets
// into data, each checked against its limit and against len(data), and
// only key and type are sliced: cutting each field with its rest was a
// third of validRecord's instructions.
func validRecord(data []byte) bool {
	if len(data) < recordFixedSize || data[0] != recordVersion {
		return false
	}
	size := uint64(len(data))
	keyLength := uint64(binary.BigEndian.Uint32(data[recordFieldsOffset:]))
	typeAt := recordFieldsOffset + 4 + keyLength // where the type's length is
	if keyLength > IdempotencyKeyLengthMax || typeAt+4 > size {
		return false
	}
	typeLength := uint64(binary.BigEndian.Uint32(data[typeAt:]))
	payloadAt := typeAt + 4 + typeLength
	if typeLength > TypeLengthMax || payloadAt+4 > size {
		return false
	}
	payloadLength := uint64(binary.BigEndian.Uint32(data[payloadAt:]))
	if payloadLength > PayloadSizeLimit || payloadAt+4+payloadLength != size {
		return false
	}
	key, typ := data[recordFieldsOffset+4:typeAt], data[typeAt+4:payloadAt]
	// The limits held both to their lengthMax: printable ASCII, what keys
	// and types nearly always are, then needs only the type's lengthMin,
	// without validText's calls.
	if typeLength != 0 && printableASCII(key) && printableASCII(typ) {
		return true
	}
	return validText("idempotency_key", key, 0, IdempotencyKeyLengthMax, ErrInvalidKey) &&
		validText("type", typ, 1, TypeLengthMax, ErrInvalidType)
}

// recordFields are the fields of a stored entry, aliasing its bytes.
type recordFields struct {
	timeUnixNano int64
	prevHash     Hash
	hash         Hash
	key, typ     []byte
	payload      []byte
}

// decodeFields is DecodeRecord without copies: it accepts exactly the
// records DecodeRecord accepts (the same shape, limits and text rules) and
// reports false for any other, whose error DecodeRecord then words.
func decodeFields(data []byte) (recordFields, bool) {
	var f recordFields
	if len(data) < recordFixedSize || data[0] != recordVersion {
		return f, false
	}
	f.timeUnixNano = int64(binary.BigEndian.Uint64(data[recordTimeOffset:]))
	f.prevHash = Hash(data[recordPrevHashOffset:recordHashOffset])
	f.hash = Hash(data[recordHashOffset:recordFieldsOffset])
	rest := data[recordFieldsOffset:]
	var fields [3][]byte
	limits := [3]int{IdempotencyKeyLengthMax, TypeLengthMax, PayloadSizeLimit}
	for i := range fields {
		if len(rest) < 4 {
			return f, false
		}
		n := binary.BigEndian.Uint32(rest)
		rest = rest[4:]
		if uint64(n) > uint64(limits[i]) || uint64(n) > uint64(len(rest)) {
			return f, false
		}
		fields[i], rest = rest[:n], rest[n:]
	}
	if len(rest) != 0 {
		return f, false
	}
	f.key, f.typ, f.payload = fields[0], fields[1], fields[2]
	if !validText("idempotency_key", f.key, 0, IdempotencyKeyLengthMax, ErrInvalidKey) ||
		!validText("type", f.typ, 1, TypeLengthMax, ErrInvalidType) {
		return f, false
	}
	return f, true
}

// validText applies validateText's rules to stored bytes. Printable ASCII,
// what keys and types nearly always are, is valid UTF-8 without control
// characters, so it is checked in one pass; anything else goes through
// validateText itself.
func validText(field string, b []byte, lengthMin, lengthMax int, sentinel error) bool {
	if len(b) >= lengthMin && len(b) <= lengthMax && printableASCII(b) {
		return true
	}
	// The view is read, never kept, while the bytes are alive.
	return validateText(field, unsafeString(b), lengthMin, lengthMax, sentinel) == nil
}

// printableASCII reports whether every byte of b is in 0x20..0x7e. It
// tests eight bytes per word, two words per step (a key is often 32 or 64
// hex digits), with the byte-range tests of "Bit Twiddling Hacks": a byte
// below 0x20 borrows into its top bit when 0x20 is subtracted, a byte of
// 0x7f carries into it when 1 is added, and a byte above has it set
// already. A borrow or carry into the next byte comes only from a byte
// that fails, so it never fails a word that passes.
func printableASCII(b []byte) bool {
	const (
		ones = 0x0101010101010101
		tops = 0x8080808080808080
	)
	if len(b) < 8 {
		for _, c := range b {
			if c < 0x20 || c >= 0x7f {
				return false
			}
		}
		return true
	}
	// The words are tested together and the result looked at once: a
	// branch per word cost more than the test. The last word may overlap
	// the one before it, which tests some bytes twice instead of one at a
	// time.
	var bad uint64
	last := binary.LittleEndian.Uint64(b[len(b)-8:])
	bad |= (last - 0x20*ones) | (last + ones) | last
	for ; len(b) >= 16; b = b[16:] {
		w, x := binary.LittleEndian.Uint64(b), binary.LittleEndian.Uint64(b[8:])
		bad |= (w - 0x20*ones) | (w + ones) | w | (x - 0x20*ones) | (x + ones) | x
	}
	if len(b) >= 8 {
		w := binary.LittleEndian.Uint64(b)
		bad |= (w - 0x20*ones) | (w + ones) | w
	}
	return bad&tops == 0
}
