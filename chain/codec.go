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
