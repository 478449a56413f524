package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/ledgerworks/ledger/storage/bolt"
)

// errOutputIsLedger: a command was asked to write a file that is the ledger
// file, its log folder or a file inside that folder. Nothing was written.
var errOutputIsLedger = errors.New("output would overwrite the ledger")

// outputLedgerError names the output that was refused and the part of the
// ledger it is.
type outputLedgerError struct {
	Output string // the output as given
	Ledger string // the ledger as given
	Part   string // "the ledger file", "its log folder" or "a file in its log folder"
}

func (e *outputLedgerError) Error() string {
	return fmt.Sprintf("%v: %s is %s %s; nothing written", errOutputIsLedger, e.Output, e.Part, e.Ledger)
}

// Unwrap makes errors.Is match errOutputIsLedger and errInvalidInput (exit 2).
func (e *outputLedgerError) Unwrap() []error { return []error{errOutputIsLedger, errInvalidInput} }

// ledgerLogFolders returns the paths where the log folder of the ledger file
// may be: beside the path as given and beside the file it resolves to. Every
// check of an output against the log goes through here.
func ledgerLogFolders(ledger, resolved string) []string {
	folders := []string{resolved + bolt.LogDirectorySuffix}
	if abs, err := filepath.Abs(ledger); err == nil && abs+bolt.LogDirectorySuffix != folders[0] {
		folders = append(folders, abs+bolt.LogDirectorySuffix)
	}
	return folders
}

// checkOutputPath refuses an output path that is the ledger file, its log
// folder or inside that folder, compared by file identity (device and inode)
// after symbolic links are resolved, so that another name, a symbolic link
// or a hard link of the ledger is refused as the ledger itself. An output
// that does not exist yet is compared by the folder it would be created in.
// A PostgreSQL ledger has no file to protect.
func checkOutputPath(ledger, output string) error {
	if isDatabaseURL(ledger) {
		return nil
	}
	refuse := func(part string) error {
		return &outputLedgerError{Output: output, Ledger: ledger, Part: part}
	}
	resolvedLedger, err := filepath.EvalSymlinks(ledger)
	if err != nil {
		return nil // no ledger file: nothing to overwrite (opening it fails on its own)
	}
	resolvedLedger, err = filepath.Abs(resolvedLedger)
	if err != nil {
		return fmt.Errorf("ledger %s: %w", ledger, err)
	}
	ledgerInfo, err := os.Stat(resolvedLedger)
	if err != nil {
		return fmt.Errorf("ledger %s: %w", ledger, err)
	}
	folders := ledgerLogFolders(ledger, resolvedLedger)
	target, err := resolveOutput(output)
	if err != nil {
		return fmt.Errorf("output %s: %w", output, err)
	}
	if info, err := os.Stat(target); err == nil && os.SameFile(info, ledgerInfo) {
		return refuse("the ledger file")
	}
	if isLogFolder(target, folders) {
		return refuse("the log folder of")
	}
	for dir := filepath.Dir(target); dir != filepath.Dir(dir); dir = filepath.Dir(dir) {
		if isLogFolder(dir, folders) {
			return refuse("a file in the log folder of")
		}
	}
	return nil
}

// resolveOutput returns the absolute path output names with every symbolic
// link resolved, the final one included; for a path that does not exist
// yet, its nearest existing folder resolved and the rest joined to it.
func resolveOutput(output string) (string, error) {
	abs, err := filepath.Abs(output)
	if err != nil {
		return "", err
	}
	rest := ""
	for path := abs; ; path = filepath.Dir(path) {
		resolved, err := filepath.EvalSymlinks(path)
		if err == nil {
			return filepath.Join(resolved, rest), nil
		}
		if !errors.Is(err, fs.ErrNotExist) || path == filepath.Dir(path) {
			return "", err
		}
		rest = filepath.Join(filepath.Base(path), rest)
	}
}

// isLogFolder reports whether the absolute, resolved path is one of the
// ledger's log folders: the same file when both exist, else the same path.
func isLogFolder(path string, folders []string) bool {
	info, statErr := os.Stat(path)
	for _, folder := range folders {
		if path == folder {
			return true
		}
		if folderInfo, err := os.Stat(folder); err == nil && statErr == nil && os.SameFile(info, folderInfo) {
			return true
		}
	}
	return false
}

// checkStandardOutput refuses to run a command whose standard output is the
// ledger file or a file in its log folder (`ledgerctl export --all >> a.db`).
// A shell's `>` has emptied such a file before the command starts; `>>`
// has not, and nothing is written to it.
func checkStandardOutput(ledger string, stdout any) error {
	f, ok := stdout.(*os.File)
	if !ok || isDatabaseURL(ledger) {
		return nil
	}
	info, err := f.Stat()
	if err != nil || !info.Mode().IsRegular() {
		return nil
	}
	resolvedLedger, err := filepath.EvalSymlinks(ledger)
	if err != nil {
		return nil
	}
	resolvedLedger, err = filepath.Abs(resolvedLedger)
	if err != nil {
		return nil
	}
	refuse := func(part string) error {
		return &outputLedgerError{Output: "standard output", Ledger: ledger, Part: part}
	}
	if ledgerInfo, err := os.Stat(resolvedLedger); err == nil && os.SameFile(info, ledgerInfo) {
		return refuse("the ledger file")
	}
	for _, folder := range ledgerLogFolders(ledger, resolvedLedger) {
		entries, err := os.ReadDir(folder)
		if err != nil {
			continue
		}
		for _, entry := range entries {
			if other, err := os.Stat(filepath.Join(folder, entry.Name())); err == nil && os.SameFile(info, other) {
				return refuse("a file in the log folder of")
			}
		}
	}
	return nil
}
