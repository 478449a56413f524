package wal

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
)

const (
	segmentSuffix = ".wal"
	spareSuffix   = ".spare"
	tempSuffix    = ".tmp"

	// zeroChunkSizeBytes is the size of one write while a segment is filled
	// with zeros.
	zeroChunkSizeBytes = 1 << 20
)

var zeroChunk = make([]byte, zeroChunkSizeBytes)

// segment is one file of the log, named by the LSN of its first record.
type segment struct {
	firstLSN  uint64
	path      string
	sizeBytes int64
}

func segmentName(firstLSN uint64) string {
	return fmt.Sprintf("%016x%s", firstLSN, segmentSuffix)
}

func spareName(number uint64) string {
	return fmt.Sprintf("%016x%s", number, spareSuffix)
}

func tempName(number uint64) string {
	return fmt.Sprintf("%016x%s", number, tempSuffix)
}

// parseNumbered returns the number of a file named %016x followed by
// suffix, and whether name has that shape.
func parseNumbered(name string, suffix string) (uint64, bool) {
	stem, found := strings.CutSuffix(name, suffix)
	if !found || len(stem) != 16 {
		return 0, false
	}
	number, err := strconv.ParseUint(stem, 16, 64)
	if err != nil || strings.ToLower(stem) != stem {
		return 0, false
	}
	return number, true
}

// createZeroed creates path (which must not exist) as a file of sizeBytes
// zeros (with header, when not nil, at its start) and makes its blocks and size durable, so that writes into it later
// change no metadata and an fdatasync then flushes data only. It gives up
// and removes the file when stop becomes true (the log is closing).
func createZeroed(path string, sizeBytes int64, stop *atomic.Bool, header []byte) (err error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	defer func() {
		closeErr := f.Close()
		if err == nil {
			err = closeErr
		}
		if err != nil {
			os.Remove(path)
		}
	}()
	for offset := int64(0); offset < sizeBytes; offset += zeroChunkSizeBytes {
		if stop != nil && stop.Load() {
			return errClosing
		}
		chunk := zeroChunk[:min(zeroChunkSizeBytes, sizeBytes-offset)]
		if _, err := f.WriteAt(chunk, offset); err != nil {
			return err
		}
	}
	if header != nil {
		if _, err := f.WriteAt(header, 0); err != nil {
			return err
		}
	}
	return syncData(f)
}

// segmentPath joins dir and the name of the segment starting at firstLSN.
func segmentPath(dir string, firstLSN uint64) string {
	return filepath.Join(dir, segmentName(firstLSN))
}
