package main

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/ledgerworks/ledger/chain"
	"github.com/ledgerworks/ledger/storage"
	"github.com/ledgerworks/ledger/storage/bolt"
)

func init() { registerCommand(newBackupCommand) }

// backupOptions are the flags of backup.
type backupOptions struct {
	out string
}

// backupSummary is what backup prints (-o json: this object) and what the
// operator socket sends after a backup's bytes.
type backupSummary struct {
	Out           string       `json:"out,omitempty"`
	Bytes         int64        `json:"bytes"`
	Chains        int          `json:"chains"`
	Entries       uint64       `json:"entries"`
	CheckpointLSN uint64       `json:"checkpoint_lsn"`
	ThroughServer bool         `json:"through_server"`
	Heads         []backupHead `json:"heads"`
}

// backupHead is one chain's head in the copy, as --expect-head takes it.
type backupHead struct {
	Chain string `json:"chain"`
	Seq   uint64 `json:"seq"`
	Hash  string `json:"hash"`
}

func newBackupSummary(info bolt.BackupInfo) backupSummary {
	s := backupSummary{Bytes: info.Bytes, Chains: len(info.Heads), Entries: info.Entries,
		CheckpointLSN: info.CheckpointLSN, Heads: make([]backupHead, len(info.Heads))}
	for i, h := range info.Heads {
		s.Heads[i] = backupHead{Chain: h.Chain, Seq: h.Head.Seq, Hash: hex.EncodeToString(h.Head.Hash[:])}
	}
	return s
}

func newBackupCommand(a *app) *cobra.Command {
	opts := backupOptions{}
	cmd := &cobra.Command{
		Use:   "backup --out FILE|-",
		Short: "Copy a ledger file, live or stopped, into one file that opens as a ledger (docs/OPERATIONS.md)",
		Long: "backup writes a consistent copy of the ledger file: every entry acknowledged before it started,\n" +
			"with the write-ahead log folded into the file, as one file that opens as a ledger on its own.\n" +
			"When a `ledgerctl serve` holds the file, the copy is taken inside the server through its operator\n" +
			"socket, and the server keeps serving; otherwise backup opens the file itself.\n\n" +
			"The copy is written under a temporary name beside FILE, synced, checked (it opens, and its heads\n" +
			"are the ones captured) and renamed into place, so FILE is never a partial copy. --out - writes\n" +
			"the copy to standard output and the summary to standard error.\n\n" +
			"It prints every chain's head in the copy as CHAIN:SEQ:HASH, the form of verify --expect-head.\n" +
			"A PostgreSQL ledger is backed up with pg_dump (docs/OPERATIONS.md).",
		Args: noArgs,
		RunE: func(cmd *cobra.Command, args []string) error { return runBackup(cmd, a, opts) },
	}
	cmd.Flags().StringVar(&opts.out, "out", "", "the backup file to write, or - for standard output")
	return cmd
}

func runBackup(cmd *cobra.Command, a *app, opts backupOptions) error {
	name := a.databaseName()
	if opts.out == "" {
		return usageErrorf("backup needs --out FILE (or --out - for standard output)")
	}
	if isDatabaseURL(name) {
		return invalidInputf("backup copies a ledger file; a PostgreSQL ledger is backed up with pg_dump (docs/OPERATIONS.md)")
	}
	if opts.out != "-" {
		if err := checkOutputPath(name, opts.out); err != nil {
			return err
		}
	}
	tmp, err := backupTemp(opts.out)
	if err != nil {
		return err
	}
	done := false
	defer func() {
		if !done {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	summary, err := a.writeBackup(cmd, tmp)
	if err != nil {
		return err
	}
	if err := sealBackup(cmd.Context(), tmp, summary); err != nil {
		return err
	}
	summaryOut := cmd.OutOrStdout()
	if opts.out == "-" {
		if err := copyFileTo(tmp.Name(), cmd.OutOrStdout()); err != nil {
			return err
		}
		os.Remove(tmp.Name())
		summaryOut = cmd.ErrOrStderr()
	} else {
		if err := placeBackup(tmp.Name(), opts.out); err != nil {
			return err
		}
		summary.Out = opts.out
	}
	done = true
	if a.output == outputJSON {
		return writeJSON(summaryOut, summary)
	}
	return writeBackupText(summaryOut, summary)
}

// sealBackup syncs and closes the copy written to tmp, makes it a ledger
// of its own and checks that it opens with the heads captured.
func sealBackup(ctx context.Context, tmp *os.File, summary backupSummary) error {
	if err := tmp.Sync(); err != nil {
		return fmt.Errorf("backup %s: %w", tmp.Name(), err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("backup %s: %w", tmp.Name(), err)
	}
	if err := bolt.SealBackup(tmp.Name()); err != nil {
		return err
	}
	return checkBackup(ctx, tmp.Name(), summary.Heads)
}

// placeBackup renames a sealed copy over out and syncs the folder.
func placeBackup(tmp, out string) error {
	if err := os.Rename(tmp, out); err != nil {
		return fmt.Errorf("backup %s: %w", out, err)
	}
	if err := syncFolder(filepath.Dir(out)); err != nil {
		return fmt.Errorf("backup %s: %w", out, err)
	}
	return nil
}

// backupTemp creates the file a backup is written to before it is renamed
// into place: beside the target, or in the temporary folder for stdout.
func backupTemp(out string) (*os.File, error) {
	dir, pattern := os.TempDir(), "ledger-backup-*"
	if out != "-" {
		dir, pattern = filepath.Dir(out), "."+filepath.Base(out)+".backup-*"
	}
	f, err := os.CreateTemp(dir, pattern)
	if err != nil {
		return nil, fmt.Errorf("backup %s: %w", out, err)
	}
	if err := f.Chmod(bolt.FileMode); err != nil {
		f.Close()
		os.Remove(f.Name())
		return nil, fmt.Errorf("backup %s: %w", out, err)
	}
	return f, nil
}

// writeBackup writes the copy's bytes to w: through the server that holds
// the file when one answers on its operator socket, else from the file.
func (a *app) writeBackup(cmd *cobra.Command, w io.Writer) (backupSummary, error) {
	ctx := cmd.Context()
	socket, err := a.findServer(ctx)
	if err != nil {
		return backupSummary{}, err
	}
	if socket != "" {
		return a.backupThroughServer(cmd, socket, w)
	}
	db, err := a.openDB(ctx, false)
	if err != nil {
		return backupSummary{}, err
	}
	defer db.Close()
	backend, ok := db.Backend().(*bolt.Backend)
	if !ok {
		return backupSummary{}, fmt.Errorf("backup: %w: %s is not a ledger file", errors.ErrUnsupported, a.databaseName())
	}
	info, err := backend.Backup(ctx, w)
	if err != nil {
		return backupSummary{}, err
	}
	return newBackupSummary(info), db.Close()
}

// backupThroughServer asks the server on socket for the copy.
func (a *app) backupThroughServer(cmd *cobra.Command, socket string, w io.Writer) (backupSummary, error) {
	db, err := a.remoteDatabase()
	if err != nil {
		return backupSummary{}, err
	}
	body, err := operatorPost(cmd.Context(), socket, "/v1/backup", operatorRequest{DB: db, JSON: a.output == outputJSON})
	if err != nil {
		return backupSummary{}, err
	}
	defer body.Close()
	var summary backupSummary
	received := false
	code, err := relayFrames(body, nil, cmd.ErrOrStderr(), w, func(payload []byte) error {
		received = true
		return json.Unmarshal(payload, &summary)
	})
	if err != nil {
		return backupSummary{}, fmt.Errorf("operator socket %s: %w", socket, err)
	}
	if code != exitSuccess {
		return backupSummary{}, &remoteExit{code: code}
	}
	if !received {
		return backupSummary{}, fmt.Errorf("operator socket %s: %w: no summary after the backup", socket, errOperatorStream)
	}
	summary.ThroughServer = true
	return summary, nil
}

// checkBackup opens the sealed copy as a ledger, read-only, and checks
// that its heads are the ones the backup captured.
func checkBackup(ctx context.Context, path string, heads []backupHead) error {
	b, err := bolt.Open(path, bolt.Options{ReadOnly: true, LockTimeout: -1})
	if err != nil {
		return fmt.Errorf("backup %s does not open as a ledger: %w", path, err)
	}
	defer b.Close()
	tx, err := b.Begin(ctx, false)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	i := 0
	for ch, err := range tx.Chains(ctx, "") {
		if err != nil {
			return err
		}
		if i >= len(heads) || !sameHead(heads[i], ch) {
			return fmt.Errorf("backup %s: %w: chain %q does not end where the backup captured it", path, chain.ErrCorrupt, ch.Chain)
		}
		i++
	}
	if i != len(heads) {
		return fmt.Errorf("backup %s: %w: %d chains, %d captured", path, chain.ErrCorrupt, i, len(heads))
	}
	return nil
}

func sameHead(h backupHead, ch storage.ChainHead) bool {
	return h.Chain == ch.Chain && h.Seq == ch.Head.Seq && h.Hash == hex.EncodeToString(ch.Head.Hash[:])
}

// copyFileTo writes a file's bytes to w.
func copyFileTo(path string, w io.Writer) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = io.Copy(w, f)
	return err
}

// syncFolder makes a rename in dir durable.
func syncFolder(dir string) error {
	f, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer f.Close()
	return f.Sync()
}

func writeBackupText(w io.Writer, s backupSummary) error {
	where := "standard output"
	if s.Out != "" {
		where = s.Out
	}
	how := "from the file"
	if s.ThroughServer {
		how = "through the server's operator socket"
	}
	if _, err := fmt.Fprintf(w, "backup of %s, %s written to %s %s\n", plural(int64(s.Chains), "chain", "chains"),
		plural(int64(s.Entries), "entry", "entries"), where, how); err != nil {
		return err
	}
	for _, h := range s.Heads {
		if _, err := fmt.Fprintf(w, "%s:%d:%s\n", h.Chain, h.Seq, h.Hash); err != nil {
			return err
		}
	}
	return nil
}
