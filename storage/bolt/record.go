package bolt

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

	operationAppend      = 1
	operationStatePut    = 2
	operationStateDelete = 3

	// ChainNameSizeMax is the longest chain name the backend stores: a key of
	// bbolt's chains bucket.
	ChainNameSizeMax = 32768
	// IdempotencyKeySizeMax is the longest idempotency key: a key of the
	// keys bucket, after its 8-byte chain id.
	IdempotencyKeySizeMax = 32768 - 8
	// StateKeySizeMax is the longest state key: a key of bbolt's state bucket.
	StateKeySizeMax = 32768
	// CommitRecordSizeMax bounds the bytes of one commit record, so of one
	// writable transaction while the log is on; a larger transaction
	// returns ErrCommitTooLarge and writes nothing.
	CommitRecordSizeMax = 1 << 30

	commitHeaderSize       = 1 + 4
	appendFixedSize        = 1 + 2 + 8 + 2 + storage.HashSize + 8 + 4
	statePutFixedSize      = 1 + 2 + 4
	stateDeleteFixedSize   = 1 + 2
	commitOperationSizeMin = stateDeleteFixedSize
)

// operation is one write of a commit record. Its byte slices point into the
// record they were decoded from.
type operation struct {
	kind  uint8
	chain string
	seq   uint64
	key   string // the idempotency key of an append
	// keyHash is keyHash(key) when the writer computed it (its lookup
	// did), else 0; it is not part of the record.
	keyHash uint64
	head    storage.Head
	data    []byte // the entry of an append, the value of a state put
	state   []byte // the key of a state operation
}

// encodedSize is the size of the operation in a commit record.
func (o *operation) encodedSize() int {
	switch o.kind {
	case operationAppend:
		return appendFixedSize + len(o.chain) + len(o.key) + len(o.data)
	case operationStatePut:
		return statePutFixedSize + len(o.state) + len(o.data)
	case operationStateDelete:
		return stateDeleteFixedSize + len(o.state)
	}
	panic(fmt.Sprintf("bolt: operation kind %d", o.kind))
}

// encodeCommit appends the commit record of operations to buf. The caller
// has checked every limit (logTx does on entry): a violation here is a
// programmer error.
func encodeCommit(buf []byte, operations []operation) []byte {
	buf = append(buf, commitRecordVersion)
	buf = binary.BigEndian.AppendUint32(buf, uint32(len(operations)))
	for i := range operations {
		o := &operations[i]
		buf = append(buf, o.kind)
		switch o.kind {
		case operationAppend:
			if len(o.chain) == 0 || len(o.chain) > ChainNameSizeMax || len(o.key) > IdempotencyKeySizeMax || o.seq == 0 {
				panic("bolt: append operation outside the limits")
			}
			buf = binary.BigEndian.AppendUint16(buf, uint16(len(o.chain)))
			buf = append(buf, o.chain...)
			buf = binary.BigEndian.AppendUint64(buf, o.seq)
			buf = binary.BigEndian.AppendUint16(buf, uint16(len(o.key)))
			buf = append(buf, o.key...)
			buf = append(buf, o.head.Hash[:]...)
			buf = binary.BigEndian.AppendUint64(buf, uint64(o.head.TimeUnixNano))
			buf = binary.BigEndian.AppendUint32(buf, uint32(len(o.data)))
			buf = append(buf, o.data...)
		case operationStatePut, operationStateDelete:
			if len(o.state) == 0 || len(o.state) > StateKeySizeMax {
				panic("bolt: state operation outside the limits")
			}
			buf = binary.BigEndian.AppendUint16(buf, uint16(len(o.state)))
			buf = append(buf, o.state...)
			if o.kind == operationStatePut {
				buf = binary.BigEndian.AppendUint32(buf, uint32(len(o.data)))
				buf = append(buf, o.data...)
			}
		default:
			panic(fmt.Sprintf("bolt: operation kind %d", o.kind))
		}
	}
	return buf
}

// encodeCommitAliased is encodeCommit that also points the byte slices of
// operations (entry data, state keys and values) into the record it
// returns, as decodeCommit of that record would: a commit applies its own
// operations to the memory table without decoding the record again, and
// the table keeps the record alone alive, not the caller's buffers.
func encodeCommitAliased(buf []byte, operations []operation) []byte {
	offset := len(buf) + commitHeaderSize
	buf = encodeCommit(buf, operations)
	alias := func(n int) []byte {
		b := buf[offset : offset+n : offset+n]
		offset += n
		return b
	}
	for i := range operations {
		o := &operations[i]
		offset++ // kind
		switch o.kind {
		case operationAppend:
			offset += 2 + len(o.chain) + 8 + 2 + len(o.key) + storage.HashSize + 8 + 4
			o.data = alias(len(o.data))
		case operationStatePut:
			offset += 2
			o.state = alias(len(o.state))
			offset += 4
			o.data = alias(len(o.data))
		case operationStateDelete:
			offset += 2
			o.state = alias(len(o.state))
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
func decodeCommit(record []byte) ([]operation, error) {
	if len(record) > CommitRecordSizeMax {
		return nil, fmt.Errorf("%w: commit record of %d bytes, limit %d", storage.ErrCorrupt, len(record), CommitRecordSizeMax)
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
	operations := make([]operation, 0, count)
	for i := 0; i < count && r.err == nil; i++ {
		o := operation{kind: r.uint8("operation kind")}
		switch o.kind {
		case operationAppend:
			o.chain = string(r.bytes(r.uint16("chain length"), "chain"))
			o.seq = r.uint64("seq")
			o.key = string(r.bytes(r.uint16("key length"), "key"))
			copy(o.head.Hash[:], r.bytes(storage.HashSize, "head hash"))
			o.head.TimeUnixNano = int64(r.uint64("head time"))
			o.head.Seq = o.seq
			o.data = r.bytes(r.uint32("data length"), "data")
			switch {
			case r.err != nil:
			case len(o.chain) == 0:
				r.fail("operation %d: empty chain name", i)
			case o.seq == 0:
				r.fail("operation %d: seq 0", i)
			case len(o.key) > IdempotencyKeySizeMax:
				r.fail("operation %d: key of %d bytes", i, len(o.key))
			}
		case operationStatePut, operationStateDelete:
			o.state = r.bytes(r.uint16("state key length"), "state key")
			if o.kind == operationStatePut {
				o.data = r.bytes(r.uint32("value length"), "value")
			}
			if r.err == nil && len(o.state) == 0 {
				r.fail("operation %d: empty state key", i)
			}
		default:
			if r.err == nil {
				r.fail("operation %d: kind %d", i, o.kind)
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
