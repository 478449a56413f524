package main

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"github.com/ledgerworks/ledger/chain"
	"github.com/ledgerworks/ledger/storage/bolt"
)

func init() { registerCommand(newRestoreCommand) }

// restoreOptions are the flags of restore.
type restoreOptions struct {
	from        string
	replace     bool
	expectHeads []string
	checkpoint  string
	key         string
}

// restoreJSON is what restore prints with -o json.
type restoreJSON struct {
	Restored string     `json:"restored"`
	From     string     `json:"from"`
	Replaced string     `json:"replaced,omitempty"`
	Verify   verifyJSON `json:"verify"`
}

func newRestoreCommand(a *app) *cobra.Command {
	opts := restoreOptions{}
	cmd := &cobra.Command{
		Use:   "restore --from BACKUP [--replace] [--expect-head CHAIN:SEQ:HASH]... [--checkpoint FILE --key PUB]",
		Short: "Put a backup in place as the ledger file, verified first; exit 1 when it does not verify",
		Long: "restore copies BACKUP (from `ledgerctl backup`) beside --db under a temporary name, verifies the\n" +
			"copy as `verify` does (every chain, the derived state, and the heads or checkpoint given, saved\n" +
			"before the backup, which prove that it holds everything acknowledged until then), and only then\n" +
			"renames it into place. It refuses a ledger a server holds. An existing ledger file is kept: with\n" +
			"--replace it is moved aside to FILE.replaced-TIME (with its log folder), never deleted.\n\n" +
			"Exit 0 when restored, 1 when the copy does not verify (nothing is put in place).",
		Args: noArgs,
		RunE: func(cmd *cobra.Command, args []string) error { return runRestore(cmd, a, opts) },
	}
	f := cmd.Flags()
	f.StringVar(&opts.from, "from", "", "the backup file to restore")
	f.BoolVar(&opts.replace, "replace", false, "move an existing ledger file (and its log folder) aside instead of refusing")
	f.StringArrayVar(&opts.expectHeads, "expect-head", nil, "CHAIN:SEQ:HASH the restored ledger must hold (repeatable)")
	f.StringVar(&opts.checkpoint, "checkpoint", "", "a signed checkpoint the restored ledger must extend; needs --key")
	f.StringVar(&opts.key, "key", "", "the verifier key file of --checkpoint")
	return cmd
}

func runRestore(cmd *cobra.Command, a *app, opts restoreOptions) error {
	name := a.databaseName()
	if opts.from == "" {
		return usageErrorf("restore needs --from BACKUP")
	}
	if isDatabaseURL(name) {
		return invalidInputf("restore puts a ledger file in place; a PostgreSQL ledger is restored with pg_restore (docs/OPERATIONS.md)")
	}
	heads, err := parseExpectHeads(opts.expectHeads)
	if err != nil {
		return err
	}
	if err := a.checkRestoreTarget(cmd, name, opts.replace); err != nil {
		return err
	}
	tmp, err := copyBeside(opts.from, name)
	if err != nil {
		return err
	}
	placed := false
	defer func() {
		if !placed {
			os.Remove(tmp)
		}
	}()
	copyApp := *a
	copyApp.database, copyApp.socket = tmp, operatorSocketOff
	report, err := verifyLedger(cmd, &copyApp, nil, heads, verifyOptions{checkpoint: opts.checkpoint, key: opts.key})
	if err != nil {
		return fmt.Errorf("restore %s: %w", opts.from, err)
	}
	result := restoreJSON{Restored: name, From: opts.from, Verify: newVerifyJSON(&report)}
	if !report.OK() {
		if err := a.print(cmd, result.Verify, func(w io.Writer) error { return writeReportText(w, &report) }); err != nil {
			return err
		}
		return fmt.Errorf("%w: %s does not verify; nothing restored", errVerificationFailed, opts.from)
	}
	if result.Replaced, err = moveAside(name, opts.replace); err != nil {
		return err
	}
	if err := os.Rename(tmp, name); err != nil {
		return fmt.Errorf("restore %s: %w", name, err)
	}
	placed = true
	if err := syncFolder(filepath.Dir(name)); err != nil {
		return fmt.Errorf("restore %s: %w", name, err)
	}
	return a.print(cmd, result, func(w io.Writer) error {
		if err := writeReportText(w, &report); err != nil {
			return err
		}
		if result.Replaced != "" {
			if _, err := fmt.Fprintf(w, "the previous ledger was moved to %s\n", result.Replaced); err != nil {
				return err
			}
		}
		_, err := fmt.Fprintf(w, "restored %s to %s\n", opts.from, name)
		return err
	})
}

// checkRestoreTarget refuses a ledger that a server or another process
// holds, and an existing one without --replace.
func (a *app) checkRestoreTarget(cmd *cobra.Command, name string, replace bool) error {
	socket, err := a.findServer(cmd.Context())
	if err != nil {
		return err
	}
	if socket != "" {
		return fmt.Errorf("restore %s: %w: a server answers on %s; stop it first", name, chain.ErrLocked, socket)
	}
	exists := false
	for _, p := range []string{name, bolt.LogDirectory(name)} {
		if _, err := os.Lstat(p); err == nil {
			exists = true
		} else if !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("restore %s: %w", name, err)
		}
	}
	if !exists {
		return nil
	}
	if !replace {
		return invalidInputf("restore: %s exists; --replace moves it aside (nothing is deleted)", name)
	}
	if _, err := os.Stat(name); err != nil {
		return nil // a log folder alone: moved aside with the file's name
	}
	b, err := bolt.Open(name, bolt.Options{ReadOnly: true, LockTimeout: -1})
	if err != nil {
		if errors.Is(err, chain.ErrLocked) {
			return fmt.Errorf("restore %s: %w; stop the process that holds it first", name, err)
		}
		return nil // a damaged ledger may be replaced: it is kept aside
	}
	return b.Close()
}

// copyBeside copies the backup to a temporary file in the folder of the
// ledger, synced, and returns its name.
func copyBeside(from, name string) (string, error) {
	src, err := os.Open(from)
	if err != nil {
		return "", invalidInputf("--from: %v", err)
	}
	defer src.Close()
	dst, err := os.CreateTemp(filepath.Dir(name), "."+filepath.Base(name)+".restore-*")
	if err != nil {
		return "", fmt.Errorf("restore %s: %w", name, err)
	}
	if err := copyAndSync(dst, src); err != nil {
		os.Remove(dst.Name())
		return "", fmt.Errorf("restore %s: %w", name, err)
	}
	return dst.Name(), nil
}

func copyAndSync(dst *os.File, src io.Reader) error {
	defer dst.Close()
	if err := dst.Chmod(bolt.FileMode); err != nil {
		return err
	}
	if _, err := io.Copy(dst, src); err != nil {
		return err
	}
	if err := dst.Sync(); err != nil {
		return err
	}
	return dst.Close()
}

// moveAside renames an existing ledger file and its log folder to
// NAME.replaced-TIME (and NAME.replaced-TIME-wal, where that file finds
// it) and returns the new name; "" when there was nothing.
func moveAside(name string, replace bool) (string, error) {
	if !replace {
		return "", nil
	}
	aside := name + ".replaced-" + time.Now().UTC().Format("20060102T150405Z")
	moved := ""
	if _, err := os.Lstat(name); err == nil {
		if err := os.Rename(name, aside); err != nil {
			return "", fmt.Errorf("restore: moving %s aside: %w", name, err)
		}
		moved = aside
	}
	if log := bolt.LogDirectory(name); folderPresent(log) {
		if err := os.Rename(log, aside+bolt.LogDirectorySuffix); err != nil {
			return moved, fmt.Errorf("restore: moving %s aside: %w", log, err)
		}
		moved = aside
	}
	return moved, nil
}

func folderPresent(p string) bool {
	info, err := os.Lstat(p)
	return err == nil && info.IsDir()
}
