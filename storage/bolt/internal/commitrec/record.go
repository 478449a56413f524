package commitrec

import (
	"encoding/binary"
	"fmt"

	"github.com/ledgerworks/ledger/storage"
)

// A commit record is what one writable transaction appends to the log: every
// write of the transaction, in the order it made them, so that replaying the
// record onto a memory table repeats the transaction exactly (see
// docs/FORMAT.md):
//
//	u8 version (commitRecordVersion) | u32be operation count | operations
//
// and each operation, by its first byte:
//
//	1 append:       u16be chain length | chain | u64be seq | u16be key length | key |
//	                head hash (32) | i64be head time | u32be data length | data
//	2 state put:    u16be key length | key | u32be value length | value
//	3 state delete: u16be key length | key
//
// Every length is checked against what is left and every limit below, and
// the record must end exactly after its last operation: a decoder that
// accepted anything else could turn damage into data.
const (
	commitRecordVersion = 1

	KindAppend      = 1
	KindStatePut    = 2
	KindStateDelete = 3

	// ChainNameSizeMax is the longest chain name the backend stores: a key of
	// bbolt's chains bucket.
	ChainNameSizeMax = 32768
	// IdempotencyKeySizeMax is the longest idempotency key: a key of the
	// keys bucket, after its 8-byte chain id.
	IdempotencyKeySizeMax = 32768 - 8
	// StateKeySizeMax is the longest state key: a key of bbolt's state bucket.
	StateKeySizeMax = 32768
	// SizeMax bounds the bytes of one commit record, so of one
	// writable transaction while the log is on; a larger transaction
	// returns ErrCommitTooLarge and writes nothing.
	SizeMax = 1 << 30

	HeaderSize             = 1 + 4
	appendFixedSize        = 1 + 2 + 8 + 2 + storage.HashSize + 8 + 4
	statePutFixedSize      = 1 + 2 + 4
	stateDeleteFixedSize   = 1 + 2
	commitOperationSizeMin = stateDeleteFixedSize
)

// operation is one write of a commit record. Its byte slices point into the
// record they were decoded from.
type Operation struct {
	Kind  uint8
	Chain string
	Seq   uint64
	Key   string // the idempotency key of an append
	// keyHash is keyHash(key) when the writer computed it (its lookup
	// did), else 0; it is not part of the record.
	KeyHash uint64
	Head    storage.Head
	Data    []byte // the entry of an append, the value of a state put
	State   []byte // the key of a state operation
}

// encodedSize is the size of the operation in a commit record.
func (o *Operation) EncodedSize() int {
	switch o.Kind {
	case KindAppend:
		return appendFixedSize + len(o.Chain) + len(o.Key) + len(o.Data)
	case KindStatePut:
		return statePutFixedSize + len(o.State) + len(o.Data)
	case KindStateDelete:
		return stateDeleteFixedSize + len(o.State)
	}
	panic(fmt.Sprintf("bolt: operation kind %d", o.Kind))
}

// encodeCommit appends the commit record of operations to buf. The caller
// has checked every limit (logTx does on entry): a violation here is a
// programmer error.
func Encode(buf []byte, operations []Operation) []byte {
	buf = append(buf, commitRecordVersion)
	buf = binary.BigEndian.AppendUint32(buf, uint32(len(operations)))
	for i := range operations {
		o := &operations[i]
		buf = append(buf, o.Kind)
		switch o.Kind {
		case KindAppend:
			if len(o.Chain) == 0 || len(o.Chain) > ChainNameSizeMax || len(o.Key) > IdempotencyKeySizeMax || o.Seq == 0 {
				panic("bolt: append operation outside the limits")
			}
			buf = binary.BigEndian.AppendUint16(buf, uint16(len(o.Chain)))
			buf = append(buf, o.Chain...)
			buf = binary.BigEndian.AppendUint64(buf, o.Seq)
			buf = binary.BigEndian.AppendUint16(buf, uint16(len(o.Key)))
			buf = append(buf, o.Key...)
			buf = append(buf, o.Head.Hash[:]...)
			buf = binary.BigEndian.AppendUint64(buf, uint64(o.Head.TimeUnixNano))
			buf = binary.BigEndian.AppendUint32(buf, uint32(len(o.Data)))
			buf = append(buf, o.Data...)
		case KindStatePut, KindStateDelete:
			if len(o.State) == 0 || len(o.State) > StateKeySizeMax {
				panic("bolt: state operation outside the limits")
			}
			buf = binary.BigEndian.AppendUint16(buf, uint16(len(o.State)))
			buf = append(buf, o.State...)
			if o.Kind == KindStatePut {
				buf = binary.BigEndian.AppendUint32(buf, uint32(len(o.Data)))
				buf = append(buf, o.Data...)
			}
		default:
			panic(fmt.Sprintf("bolt: operation kind %d", o.Kind))
		}
	}
	return buf
}

// encodeCommitAliased is encodeCommit that also points the byte slices of
// operations (entry data, state keys and values) into the record it
// returns, as decodeCommit of that record would: a commit applies its own
// operations to the memory table without decoding the record again, and
// the table keeps the record alone alive, not the caller's buffers.
func EncodeAliased(buf []byte, operations []Operation) []byte {
	offset := len(buf) + HeaderSize
	buf = Encode(buf, operations)
	alias := func(n int) []byte {
		b := buf[offset : offset+n : offset+n]
		offset += n
		return b
	}
	for i := range operations {
		o := &operations[i]
		offset++ // kind
		switch o.Kind {
		case KindAppend:
			offset += 2 + len(o.Chain) + 8 + 2 + len(o.Key) + storage.HashSize + 8 + 4
			o.Data = alias(len(o.Data))
		case KindStatePut:
			offset += 2
			o.State = alias(len(o.State))
			offset += 4
			o.Data = alias(len(o.Data))
		case KindStateDelete:
			offset += 2
			o.State = alias(len(o.State))
		}
	}
	if offset != len(buf) {
		panic(fmt.Sprintf("bolt: commit record of %d bytes, operations end at %d", len(buf), offset))
	}
	return buf
}

// recordReader takes fields off the front of a commit record; the first
// shortfall sets err and every later read returns zero values.
type recordReader struct {
	rest []byte
	err  error
}

func (r *recordReader) fail(format string, args ...any) {
	if r.err == nil {
		r.err = fmt.Errorf("%w: commit record: %s", storage.ErrCorrupt, fmt.Sprintf(format, args...))
	}
}

func (r *recordReader) bytes(n int, what string) []byte {
	if r.err != nil {
		return nil
	}
	if n > len(r.rest) {
		r.fail("%s of %d bytes, %d left", what, n, len(r.rest))
		return nil
	}
	b := r.rest[:n:n]
	r.rest = r.rest[n:]
	return b
}

func (r *recordReader) uint8(what string) uint8 {
	if b := r.bytes(1, what); b != nil {
		return b[0]
	}
	return 0
}

func (r *recordReader) uint16(what string) int {
	if b := r.bytes(2, what); b != nil {
		return int(binary.BigEndian.Uint16(b))
	}
	return 0
}

func (r *recordReader) uint32(what string) int {
	if b := r.bytes(4, what); b != nil {
		return int(binary.BigEndian.Uint32(b))
	}
	return 0
}

func (r *recordReader) uint64(what string) uint64 {
	if b := r.bytes(8, what); b != nil {
		return binary.BigEndian.Uint64(b)
	}
	return 0
}

// decodeCommit decodes a commit record strictly; the operations' slices
// point into record. An error wraps storage.ErrCorrupt.
func Decode(record []byte) ([]Operation, error) {
	if len(record) > SizeMax {
		return nil, fmt.Errorf("%w: commit record of %d bytes, limit %d", storage.ErrCorrupt, len(record), SizeMax)
	}
	r := recordReader{rest: record}
	if v := r.uint8("version"); r.err == nil && v != commitRecordVersion {
		r.fail("version %d, want %d", v, commitRecordVersion)
	}
	count := r.uint32("operation count")
	if r.err != nil {
		return nil, r.err
	}
	if count > len(r.rest)/commitOperationSizeMin {
		return nil, fmt.Errorf("%w: commit record: %d operations in %d bytes", storage.ErrCorrupt, count, len(r.rest))
	}
	operations := make([]Operation, 0, count)
	for i := 0; i < count && r.err == nil; i++ {
		o := Operation{Kind: r.uint8("operation kind")}
		switch o.Kind {
		case KindAppend:
			o.Chain = string(r.bytes(r.uint16("chain length"), "chain"))
			o.Seq = r.uint64("seq")
			o.Key = string(r.bytes(r.uint16("key length"), "key"))
			copy(o.Head.Hash[:], r.bytes(storage.HashSize, "head hash"))
			o.Head.TimeUnixNano = int64(r.uint64("head time"))
			o.Head.Seq = o.Seq
			o.Data = r.bytes(r.uint32("data length"), "data")
			switch {
			case r.err != nil:
			case len(o.Chain) == 0:
				r.fail("operation %d: empty chain name", i)
			case o.Seq == 0:
				r.fail("operation %d: seq 0", i)
			case len(o.Key) > IdempotencyKeySizeMax:
				r.fail("operation %d: key of %d bytes", i, len(o.Key))
			}
		case KindStatePut, KindStateDelete:
			o.State = r.bytes(r.uint16("state key length"), "state key")
			if o.Kind == KindStatePut {
				o.Data = r.bytes(r.uint32("value length"), "value")
			}
			if r.err == nil && len(o.State) == 0 {
				r.fail("operation %d: empty state key", i)
			}
		default:
			if r.err == nil {
				r.fail("operation %d: kind %d", i, o.Kind)
			}
		}
		operations = append(operations, o)
	}
	if r.err != nil {
		return nil, r.err
	}
	if len(r.rest) != 0 {
		return nil, fmt.Errorf("%w: commit record: %d bytes after the last operation", storage.ErrCorrupt, len(r.rest))
	}
	return operations, nil
}
