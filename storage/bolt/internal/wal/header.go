package wal

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"hash/crc32"
	"os"

	"github.com/ledgerworks/ledger/storage"
)

const (
	// IDSizeBytes is the size of a log's identity (Options.ID).
	IDSizeBytes = 16

	// SegmentHeaderSizeBytes is the header at the start of every segment of
	// a log with an identity: its records start after it.
	SegmentHeaderSizeBytes = 48

	// sealSizeBytes is the size of the seal written after the last record
	// of a segment the log has left: a record header whose length field is
	// sealLength and whose LSN is the first of the next segment.
	sealSizeBytes = RecordHeaderSizeBytes

	// sealLength is the length field of a seal. Its top bit is over
	// RecordSizeMax, so no record of any version has it.
	sealLength = 1 << 31
)

// segmentMagic opens a segment header. Its first byte is over 0x40, so it is
// never the length of a record (RecordSizeMax is 1 << 30): a segment that
// starts with it has a header, one written by an earlier version does not.
var segmentMagic = [8]byte{'L', 'E', 'D', 'G', 'W', 'A', 'L', 1}

// ID is the identity of a log, recorded in its file and in every segment.
type ID [IDSizeBytes]byte

// IsZero reports whether id is the zero ID (a log without identity).
func (id ID) IsZero() bool { return id == ID{} }

func (id ID) String() string { return hex.EncodeToString(id[:]) }

// segmentHeader is what a segment's header says.
type segmentHeader struct {
	id        ID
	firstLSN  uint64
	sizeBytes int64
}

// encodeSegmentHeader returns the header of a segment:
//
//	magic (8 bytes) | ID (16) | u64be first LSN | u64be size in bytes | 4 zero bytes | u32be CRC-32C of the 44 bytes before
func encodeSegmentHeader(h segmentHeader) []byte {
	b := make([]byte, SegmentHeaderSizeBytes)
	copy(b[0:8], segmentMagic[:])
	copy(b[8:24], h.id[:])
	binary.BigEndian.PutUint64(b[24:32], h.firstLSN)
	binary.BigEndian.PutUint64(b[32:40], uint64(h.sizeBytes))
	binary.BigEndian.PutUint32(b[44:48], crc32.Checksum(b[:44], castagnoli))
	return b
}

// hasMagic reports whether the first bytes of a segment open a header.
func hasMagic(b []byte) bool { return len(b) >= 8 && bytes.Equal(b[:8], segmentMagic[:]) }

// readSegmentHeader reads and checks the header of f, the segment s of a log
// whose identity is want: it must be whole, name the segment's first LSN and
// size, and carry want. A header with another identity is a
// *ForeignSegmentError.
func readSegmentHeader(f *os.File, s *segment, want ID) error {
	b := make([]byte, SegmentHeaderSizeBytes)
	if s.sizeBytes < SegmentHeaderSizeBytes {
		return fmt.Errorf("wal: segment %s: %d bytes, shorter than its header: %w", s.path, s.sizeBytes, storage.ErrCorrupt)
	}
	if _, err := f.ReadAt(b, 0); err != nil {
		return readError(f, 0, err)
	}
	if !hasMagic(b) {
		return fmt.Errorf("wal: segment %s: no segment header at offset 0 (emptied, overwritten, or written by an earlier version): %w",
			s.path, storage.ErrCorrupt)
	}
	if crc32.Checksum(b[:44], castagnoli) != binary.BigEndian.Uint32(b[44:48]) {
		return fmt.Errorf("wal: segment %s: the segment header's checksum fails at offset 0: %w", s.path, storage.ErrCorrupt)
	}
	var h segmentHeader
	copy(h.id[:], b[8:24])
	h.firstLSN = binary.BigEndian.Uint64(b[24:32])
	h.sizeBytes = int64(binary.BigEndian.Uint64(b[32:40]))
	if h.id != want {
		return &ForeignSegmentError{Segment: s.path, Found: h.id, Want: want}
	}
	if h.firstLSN != s.firstLSN {
		return fmt.Errorf("wal: segment %s: its header says it starts at LSN %d (renamed?): %w", s.path, h.firstLSN, storage.ErrCorrupt)
	}
	if h.sizeBytes != s.sizeBytes {
		return fmt.Errorf("wal: segment %s: %d bytes, its header says %d (cut short or extended): %w",
			s.path, s.sizeBytes, h.sizeBytes, storage.ErrCorrupt)
	}
	return nil
}

// writeSegmentHeader writes the header of the segment at path (a spare
// becoming a segment) and makes it durable.
func writeSegmentHeader(path string, h segmentHeader) (err error) {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	defer func() {
		if closeErr := f.Close(); err == nil {
			err = closeErr
		}
	}()
	if _, err := f.WriteAt(encodeSegmentHeader(h), 0); err != nil {
		return err
	}
	return syncData(f)
}

// encodeSeal returns the seal of a segment whose successor starts at nextLSN.
func encodeSeal(nextLSN uint64) []byte {
	b := make([]byte, sealSizeBytes)
	binary.BigEndian.PutUint32(b[0:4], sealLength)
	binary.BigEndian.PutUint64(b[4:12], nextLSN)
	binary.BigEndian.PutUint32(b[12:16], recordChecksum(b, nil))
	return b
}

// ForeignSegmentError is the error of a segment that belongs to another log:
// copied in from another ledger, or left by another lineage of this one. It
// matches storage.ErrCorrupt.
type ForeignSegmentError struct {
	Segment string
	Found   ID // the identity in the segment's header
	Want    ID // the identity the log was opened with
}

func (e *ForeignSegmentError) Error() string {
	if e.Want.IsZero() {
		return fmt.Sprintf("wal: segment %s belongs to log %s, and the file records no log", e.Segment, e.Found)
	}
	return fmt.Sprintf("wal: segment %s belongs to log %s, not to this file's log %s", e.Segment, e.Found, e.Want)
}

func (e *ForeignSegmentError) Unwrap() error { return storage.ErrCorrupt }
