package main

import (
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"

	"github.com/ledgerworks/ledger/storage/bolt"
)

func init() { registerCommand(newAcceptLogLossCommand) }

// acceptLogLossJSON is the shape `accept-log-loss -o json` prints.
type acceptLogLossJSON struct {
	Path string `json:"path"`
	// Log is the log folder found; "" when there was none.
	Log string `json:"log"`
	// KeptAs is where the log folder was moved, untouched.
	KeptAs string `json:"kept_as"`
	// Replayed is how many log records were put into the file.
	Replayed uint64 `json:"replayed_records"`
	// CheckpointLSN is the last log record the file holds now.
	CheckpointLSN uint64 `json:"checkpoint_lsn"`
	// Damage is what ended the records kept; "" when the log was intact.
	Damage string `json:"damage"`
}

type acceptLogLossOptions struct {
	confirm bool
}

func newAcceptLogLossCommand(a *app) *cobra.Command {
	opts := acceptLogLossOptions{}
	cmd := &cobra.Command{
		Use:   "accept-log-loss --confirm",
		Short: "Open a ledger whose write-ahead log is damaged or missing, accepting the loss of what it held past the damage",
		Long: "A ledger file opened with the write-ahead log on keeps recent commits in the folder <file>-wal\n" +
			"until they are checkpointed into the file. When that log is damaged (a segment changed, cut,\n" +
			"deleted, renamed or of another ledger) or missing while the file says it was not closed cleanly,\n" +
			"every command refuses the ledger (exit 5, CORRUPT) and leaves the log as it is.\n\n" +
			"accept-log-loss is the explicit step that opens it again: it puts into the file every record\n" +
			"of the file's own log that precedes the damage, moves the log folder aside to\n" +
			"<file>-wal.discarded-<UTC time> (nothing in it is deleted, for an operator to examine) and\n" +
			"records that the file is closed cleanly. Commits past the damage are lost; run `ledgerctl verify`\n" +
			"afterwards. With an intact log every record is kept.",
		Args: noArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return runAcceptLogLoss(cmd, a, opts)
		},
	}
	cmd.Flags().BoolVar(&opts.confirm, "confirm", false, "accept the loss of the log's records past its damage (required)")
	return cmd
}

func runAcceptLogLoss(cmd *cobra.Command, a *app, opts acceptLogLossOptions) error {
	name := a.databaseName()
	if isDatabaseURL(name) {
		return usageErrorf("accept-log-loss works on a ledger file; a PostgreSQL database has no write-ahead log of its own")
	}
	if !opts.confirm {
		return usageErrorf("accept-log-loss discards what the log holds past its damage; pass --confirm to do it")
	}
	if _, err := os.Stat(name); err != nil {
		return fmt.Errorf("ledger %s: %w (create it with `ledgerctl init`)", name, errLedgerMissing)
	}
	timeout := a.lockTimeout
	if timeout == 0 {
		timeout = -1
	}
	loss, err := bolt.AcceptLogLoss(name, bolt.Options{LockTimeout: timeout, Logger: a.logger()})
	if err != nil {
		return err
	}
	out := acceptLogLossJSON{Path: displayName(name), Log: loss.Log, KeptAs: loss.KeptAs, Replayed: loss.Replayed,
		CheckpointLSN: loss.CheckpointLSN, Damage: loss.Damage}
	return a.print(cmd, out, func(w io.Writer) error {
		switch {
		case loss.Log == "":
			_, err := fmt.Fprintf(w, "ledger %s: no log folder; the file now says it was closed cleanly (checkpoint LSN %d)\n",
				out.Path, loss.CheckpointLSN)
			return err
		case loss.Damage == "":
			_, err := fmt.Fprintf(w, "ledger %s: the log %s was intact; %d records put into the file (checkpoint LSN %d), the folder moved to %s\n",
				out.Path, loss.Log, loss.Replayed, loss.CheckpointLSN, loss.KeptAs)
			return err
		}
		_, err := fmt.Fprintf(w, "ledger %s: %d records of the log %s put into the file (checkpoint LSN %d); what followed the damage is lost: %s\nthe log folder is kept as %s\n",
			out.Path, loss.Replayed, loss.Log, loss.CheckpointLSN, loss.Damage, loss.KeptAs)
		return err
	})
}
