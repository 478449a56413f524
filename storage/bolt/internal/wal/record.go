package wal

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"

	"github.com/ledgerworks/ledger/storage"
)

const (
	// RecordHeaderSizeBytes is the fixed header in front of each payload:
	// u32be payload length, u64be LSN, u32be CRC-32C.
	RecordHeaderSizeBytes = 16

	// RecordAlignmentBytes: each record starts at a multiple of it (the
	// payload is padded), so every header is aligned in the file.
	RecordAlignmentBytes = 8

	// readBufferSizeBytes is the read-ahead of a segment scan: small records
	// are read in one system call per 64 KiB rather than two per record.
	readBufferSizeBytes = 64 << 10
)

// Record is one record read back.
type Record struct {
	LSN uint64
	// Payload is valid until the next iteration step.
	Payload []byte
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// recordSizeBytes is the space a record with a payload of payloadSize bytes
// takes in a segment, padding included.
func recordSizeBytes(payloadSize int) int64 {
	size := int64(RecordHeaderSizeBytes) + int64(payloadSize)
	return (size + RecordAlignmentBytes - 1) &^ (RecordAlignmentBytes - 1)
}

// recordChecksum is the CRC-32C over the length and LSN fields of header
// and the payload.
func recordChecksum(header []byte, payload []byte) uint32 {
	sum := crc32.Update(0, castagnoli, header[:12])
	return crc32.Update(sum, castagnoli, payload)
}

// encodeHeader fills header (RecordHeaderSizeBytes long) for payload.
func encodeHeader(header []byte, lsn uint64, payload []byte) {
	binary.BigEndian.PutUint32(header[0:4], uint32(len(payload)))
	binary.BigEndian.PutUint64(header[4:12], lsn)
	binary.BigEndian.PutUint32(header[12:16], recordChecksum(header, payload))
}

// segmentScan is the result of reading one segment from its start.
type segmentScan struct {
	records   uint64 // valid records found
	lastLSN   uint64 // LSN of the last valid record; 0 when records == 0
	endOffset int64  // where the next record goes
	// sealed is set when a seal follows the last record: the log left the
	// segment, and the next one starts at lastLSN+1.
	sealed bool
	// overrun is set when the header at endOffset has the expected LSN and
	// a length that runs past the file's end, which no append writes.
	overrun bool
}

// scanSegment reads the records of the segment f (sizeBytes long) from
// offset start, where the record with LSN firstLSN must be, up to the first
// record that is not valid (the end of the segment's log) or a seal (when
// seals is set). Each valid record is passed to fn; fn returning false stops
// the scan early. An error is returned only when the file cannot be read; an
// invalid record is not an error here: the caller decides whether an early
// end is damage.
func scanSegment(f *os.File, sizeBytes int64, start int64, firstLSN uint64, seals bool, fn func(Record) bool) (segmentScan, error) {
	reader := bufio.NewReaderSize(io.NewSectionReader(f, start, sizeBytes-start), readBufferSizeBytes)
	var header [RecordHeaderSizeBytes]byte
	var payload []byte
	scan := segmentScan{endOffset: start}
	expected := firstLSN
	for {
		if scan.endOffset+RecordHeaderSizeBytes > sizeBytes {
			return scan, nil
		}
		if _, err := io.ReadFull(reader, header[:]); err != nil {
			return scan, readError(f, scan.endOffset, err)
		}
		length := binary.BigEndian.Uint32(header[0:4])
		lsn := binary.BigEndian.Uint64(header[4:12])
		if lsn != expected || expected == 0 {
			return scan, nil
		}
		if length == sealLength && seals {
			scan.sealed = recordChecksum(header[:], nil) == binary.BigEndian.Uint32(header[12:16])
			return scan, nil
		}
		if length > RecordSizeMax {
			return scan, nil
		}
		size := recordSizeBytes(int(length))
		if scan.endOffset+size > sizeBytes {
			scan.overrun = true
			return scan, nil
		}
		if cap(payload) < int(length) {
			payload = make([]byte, length)
		}
		payload = payload[:length]
		if _, err := io.ReadFull(reader, payload); err != nil {
			return scan, readError(f, scan.endOffset, err)
		}
		if recordChecksum(header[:], payload) != binary.BigEndian.Uint32(header[12:16]) {
			return scan, nil
		}
		if _, err := reader.Discard(int(size - RecordHeaderSizeBytes - int64(length))); err != nil {
			return scan, readError(f, scan.endOffset, err)
		}
		scan.records++
		scan.lastLSN = lsn
		scan.endOffset += size
		expected = lsn + 1
		if !fn(Record{LSN: lsn, Payload: payload}) {
			return scan, nil
		}
	}
}

// laterRecord looks, in f (sizeBytes long) from offset from on, for a valid
// record or seal with an LSN of at least minLSN at any aligned offset, and
// returns its offset and LSN (found false when there is none). Behind the
// end of a log there are only zeros, a torn record and records of LSNs
// older than the segment (a recycled spare's): a valid newer record there
// means the log's end is damage, not a torn write.
func laterRecord(f *os.File, sizeBytes int64, from int64, minLSN uint64) (offset int64, lsn uint64, found bool, err error) {
	from = (from + RecordAlignmentBytes - 1) &^ (RecordAlignmentBytes - 1)
	chunk := make([]byte, readBufferSizeBytes)
	var payload []byte
	for base := from; base+RecordHeaderSizeBytes <= sizeBytes; base += int64(len(chunk)) - RecordHeaderSizeBytes {
		n := min(int64(len(chunk)), sizeBytes-base)
		b := chunk[:n]
		if _, err := f.ReadAt(b, base); err != nil {
			return 0, 0, false, readError(f, base, err)
		}
		for i := int64(0); i+RecordHeaderSizeBytes <= n; i += RecordAlignmentBytes {
			h := b[i : i+RecordHeaderSizeBytes]
			candidate := binary.BigEndian.Uint64(h[4:12])
			if candidate < minLSN || candidate == 0 {
				continue
			}
			length := binary.BigEndian.Uint32(h[0:4])
			if length == sealLength {
				if recordChecksum(h, nil) == binary.BigEndian.Uint32(h[12:16]) {
					return base + i, candidate, true, nil
				}
				continue
			}
			if length > RecordSizeMax || base+i+recordSizeBytes(int(length)) > sizeBytes {
				continue
			}
			if cap(payload) < int(length) {
				payload = make([]byte, length)
			}
			payload = payload[:length]
			if _, err := f.ReadAt(payload, base+i+RecordHeaderSizeBytes); err != nil {
				return 0, 0, false, readError(f, base+i, err)
			}
			if recordChecksum(h, payload) == binary.BigEndian.Uint32(h[12:16]) {
				return base + i, candidate, true, nil
			}
		}
		if n < int64(len(chunk)) {
			break
		}
	}
	return 0, 0, false, nil
}

func readError(f *os.File, offset int64, err error) error {
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		// The file is shorter than its size when opened: it changed under us.
		return fmt.Errorf("wal: segment %s: short read at offset %d: %w", f.Name(), offset, storage.ErrCorrupt)
	}
	return fmt.Errorf("wal: segment %s: read at offset %d: %w: %w", f.Name(), offset, storage.ErrIO, err)
}
