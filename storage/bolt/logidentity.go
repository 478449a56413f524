package bolt

import (
	"crypto/rand"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	bbolt "go.etcd.io/bbolt"

	"github.com/ledgerworks/ledger/storage"
	"github.com/ledgerworks/ledger/storage/bolt/internal/readpool"
	"github.com/ledgerworks/ledger/storage/bolt/internal/wal"
)

// The file records which log is its own, so that a log is found from the
// file and tied to it rather than to a path string:
//
//   - meta/log_id is the identity of the log the file was last opened with
//     (16 random bytes, new for every log folder created), and every segment
//     of that log carries it in its header;
//   - meta/log_state is "open" from before a handle's first log record
//     until a clean close, whose final checkpoint writes "closed" in each
//     of its bbolt transactions (closeLog);
//   - meta/log_dir is the absolute path of that log's folder, by which an
//     open through another hard link of the file finds it.
//
// A file without log_id was last written by an earlier version or never
// ran the log.
var (
	metaLogID    = []byte("log_id")
	metaLogState = []byte("log_state")
	metaLogDir   = []byte("log_dir")
)

const (
	logStateOpen   = "open"
	logStateClosed = "closed"
)

// logIdentity is what the file records about its log.
type logIdentity struct {
	id   wal.ID
	open bool   // log_state is "open": the file was not closed cleanly
	dir  string // log_dir; "" when not recorded
}

// readLogIdentity reads the log's identity from the file.
func (b *Backend) readLogIdentity() (ident logIdentity, err error) {
	err = b.guardedView(func(btx *bbolt.Tx) error {
		meta := btx.Bucket(BucketMeta)
		if v := meta.Get(metaLogID); v != nil {
			if len(v) != wal.IDSizeBytes {
				return fmt.Errorf("open %s: %w: log_id of %d bytes", b.path, storage.ErrCorrupt, len(v))
			}
			copy(ident.id[:], v)
		}
		switch v := string(meta.Get(metaLogState)); v {
		case logStateOpen:
			ident.open = true
		case logStateClosed, "":
		default:
			return fmt.Errorf("open %s: %w: log_state %q", b.path, storage.ErrCorrupt, v)
		}
		ident.dir = string(meta.Get(metaLogDir))
		return nil
	})
	return ident, err
}

// guardedView runs fn in a read transaction under recover.
func (b *Backend) guardedView(fn func(btx *bbolt.Tx) error) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("open %w", damagedError(b.path, p))
		}
	}()
	return b.db.View(fn)
}

// markLogOpen records, before the log takes its first record, that the file
// runs the log id in dir and is not closed cleanly.
func (b *Backend) markLogOpen(id wal.ID, dir string) error {
	absolute, err := filepath.Abs(dir)
	if err != nil {
		return fmt.Errorf("open %s: %w: %v", b.path, storage.ErrIO, err)
	}
	return b.putLogMeta(map[string][]byte{
		string(metaLogID): id[:], string(metaLogState): []byte(logStateOpen), string(metaLogDir): []byte(absolute),
	})
}

// markLogClosed records that the file holds every record of its log.
func (b *Backend) markLogClosed() error {
	return b.putLogMeta(map[string][]byte{string(metaLogState): []byte(logStateClosed)})
}

func (b *Backend) putLogMeta(values map[string][]byte) (err error) {
	btx, err := b.beginBolt(true)
	if err != nil {
		return err
	}
	outcome, txid := readpool.WriteRolledBack, uint64(btx.ID())
	defer func() {
		if p := recover(); p != nil {
			btx.Rollback()
			outcome, err = readpool.WriteRolledBack, damagedError(b.path, p)
		}
		b.readers.EndWrite(outcome, txid)
	}()
	meta := btx.Bucket(BucketMeta)
	for k, v := range values {
		if err := meta.Put([]byte(k), v); err != nil {
			btx.Rollback()
			return fmt.Errorf("record the log of %s: %w: %v", b.path, storage.ErrIO, err)
		}
	}
	if err := btx.Commit(); err != nil {
		outcome = readpool.WriteFailed
		return fmt.Errorf("record the log of %s: %w: %v", b.path, storage.ErrIO, err)
	}
	outcome = readpool.WriteCommitted
	return nil
}

// newLogID returns a fresh log identity.
func newLogID() wal.ID {
	var id wal.ID
	if _, err := rand.Read(id[:]); err != nil {
		panic(fmt.Sprintf("bolt: no randomness for a log identity: %v", err)) // crypto/rand does not fail on supported systems
	}
	return id
}

// findLogDirectory returns the folder of the file's log and whether it
// exists: the folder named from the file's real path (symbolic links
// resolved), or, when that is missing and the file was not closed cleanly,
// the folder the file recorded, provided it is named from another hard link
// of this same file (never a copy's: two files must not share a log).
func (b *Backend) findLogDirectory(ident logIdentity) (string, bool, error) {
	own := LogDirectory(b.path)
	if named := b.path + LogDirectorySuffix; named != own {
		// A folder named from a symbolic link was left by an earlier
		// version, which named the log from the path string: its records
		// are never skipped.
		exists, err := folderExists(named)
		if err != nil {
			return own, false, err
		}
		if exists {
			return own, false, fmt.Errorf("%w: the log folder %s is named from a symbolic link to the file, whose log is %s: move its segments there",
				storage.ErrCorrupt, named, own)
		}
	}
	exists, err := folderExists(own)
	if err != nil || exists {
		return own, exists, err
	}
	if !ident.open || ident.dir == "" {
		return own, false, nil
	}
	absolute, err := filepath.Abs(own)
	if err != nil || absolute == ident.dir {
		return own, false, nil
	}
	name, ok := strings.CutSuffix(ident.dir, LogDirectorySuffix)
	if !ok || !sameFile(name, b.path) {
		return own, false, nil
	}
	exists, err = folderExists(ident.dir)
	if err != nil || !exists {
		return own, false, err
	}
	return ident.dir, true, nil
}

func folderExists(dir string) (bool, error) {
	info, err := os.Stat(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("stat %s: %w: %v", dir, storage.ErrIO, err)
	case !info.IsDir():
		return false, fmt.Errorf("%s: %w: the log folder is not a folder", dir, storage.ErrCorrupt)
	}
	return true, nil
}

// sameFile reports whether the paths name one file (one inode).
func sameFile(a, b string) bool {
	x, err := os.Stat(a)
	if err != nil {
		return false
	}
	y, err := os.Stat(b)
	return err == nil && os.SameFile(x, y)
}

// missingLogError is the error of a file that says it was not closed
// cleanly and whose log folder is nowhere to be found.
func (b *Backend) missingLogError(ident logIdentity, dir string) error {
	detail := ""
	if n := linkCount(b.path); n > 1 {
		detail = fmt.Sprintf("; the file has %d hard links", n)
	}
	if ident.dir != "" {
		detail += fmt.Sprintf("; it was last opened with the log %s", ident.dir)
	}
	return fmt.Errorf("open %s: %w: the file was not closed cleanly (log %s), and its log folder %s is missing%s; "+
		"`ledgerctl accept-log-loss` opens it without the log's records", b.path, storage.ErrCorrupt, ident.id, dir, detail)
}
