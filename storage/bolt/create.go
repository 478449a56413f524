package bolt

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync/atomic"
	"time"

	bbolt "go.etcd.io/bbolt"

	"github.com/ledgerworks/ledger/storage"
)

// createNew makes a formatted ledger file at path when there is none, so
// that a ledger file is either absent or formatted. bbolt writes a new
// file's first pages before the ledger's buckets exist: a process killed
// between the two left a file that no read-only open could read ("no meta
// bucket") until a writable open formatted it. Here the file is formatted
// under a temporary name in the same folder and then linked to path. Link
// fails when another process created path meanwhile; that file is then
// opened as it is. Where the file system has no hard links, the file is
// created in place as before.
//
// A process killed while it formats leaves the temporary file behind
// (".<name>.new-<digits>", mode 0600, holding no entries); nothing reads it,
// and the next writable open removes it (removeLeftovers).
func createNew(path string, bopts *bbolt.Options) error {
	removeLeftovers(path)
	if _, err := os.Lstat(path); !errors.Is(err, fs.ErrNotExist) {
		return nil // there is a file, or the open says why it cannot look
	}
	folder := filepath.Dir(path)
	temporary, err := os.CreateTemp(folder, "."+filepath.Base(path)+".new-*")
	if err != nil {
		return nil // the open in place reports why the folder cannot take a file
	}
	name := temporary.Name()
	defer os.Remove(name)
	if err := temporary.Close(); err != nil {
		return fmt.Errorf("create %s: %w: %v", path, storage.ErrIO, err)
	}
	options := *bopts
	options.ReadOnly = false
	// bbolt's own map size: with a larger one it grows a file in 16 MiB
	// steps, and a new ledger would start that large.
	options.InitialMmapSize = 0
	db, err := bbolt.Open(name, FileMode, &options)
	if err != nil {
		return fmt.Errorf("create %s: %w: %v", path, storage.ErrIO, err)
	}
	if hook := createdTemporary.Load(); hook != nil {
		(*hook)(name)
	}
	if err := db.Update(create); err != nil {
		db.Close()
		return fmt.Errorf("create %s: %w: %v", path, storage.ErrIO, err)
	}
	if err := db.Close(); err != nil {
		return fmt.Errorf("create %s: %w: %v", path, storage.ErrIO, err)
	}
	switch err := os.Link(name, path); {
	case err == nil:
	case errors.Is(err, fs.ErrExist):
		return nil // another process created it first
	default:
		return nil // no hard links here: bbolt creates the file in place
	}
	if err := syncFolder(folder); err != nil {
		return fmt.Errorf("create %s: %w: %v", path, storage.ErrIO, err)
	}
	return nil
}

// leftoverAgeMin is how old a temporary file must be before it is taken for
// a leftover: a creation formats its file in milliseconds, and between
// creating the file and locking it there is no lock to tell it is in use.
const leftoverAgeMin = time.Minute

// removeLeftovers removes the temporary files of creations of path that
// were killed: those older than leftoverAgeMin that no process holds
// locked (bbolt locks the file it formats). Failures are ignored: a
// leftover holds no entries and is only clutter.
func removeLeftovers(path string) {
	pattern := filepath.Join(filepath.Dir(path), "."+filepath.Base(path)+".new-*")
	names, err := filepath.Glob(pattern)
	if err != nil {
		return // a malformed pattern: path has glob characters in its name
	}
	for _, name := range names {
		info, err := os.Lstat(name)
		if err != nil || !info.Mode().IsRegular() || time.Since(info.ModTime()) < leftoverAgeMin {
			continue
		}
		if lockedByAnother(name) {
			continue
		}
		os.Remove(name)
	}
}

// createdTemporary, when set (by a test), is called with the temporary
// file's name once bbolt has initialized it and before it is formatted.
var createdTemporary atomic.Pointer[func(name string)]

// syncFolder makes a folder's entries durable: the name of a file just
// linked into it.
func syncFolder(folder string) error {
	f, err := os.Open(folder)
	if err != nil {
		return err
	}
	defer f.Close()
	return f.Sync()
}
