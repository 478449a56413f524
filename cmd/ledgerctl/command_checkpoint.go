package main

import (
	"context"
	"fmt"
	"io"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/ledgerworks/ledger/audit"
	"github.com/ledgerworks/ledger/checkpoint"
)

func init() { registerCommand(newCheckpointCommand) }

type checkpointOptions struct {
	key   string
	out   string
	every time.Duration
}

func newCheckpointCommand(a *app) *cobra.Command {
	opts := checkpointOptions{}
	cmd := &cobra.Command{
		Use:   "checkpoint --key FILE [--out FILE] [--every DURATION]",
		Short: "Sign a checkpoint of every chain's Merkle tree; print it or write it",
		Long: "checkpoint reads every chain's tree head (its size and root) from one snapshot, signs the\n" +
			"checkpoint of them with the key from keygen and records the heads in the ledger, so that\n" +
			"`prove` can answer against it later. It prints the signed note, or writes it to --out.\n\n" +
			"--every DURATION keeps running and writes a new checkpoint to --out every DURATION when the\n" +
			"ledger changed, until interrupted: a service publishes its checkpoints this way (the Go API is\n" +
			"audit.Publisher).",
		Args: exactArgs(0),
		RunE: func(cmd *cobra.Command, args []string) error {
			key, err := readKeyFile(opts.key, "--key", signingKey)
			if err != nil {
				return err
			}
			if opts.every != 0 {
				return runPublisher(cmd, a, key, opts)
			}
			db, err := a.openDB(cmd.Context(), false)
			if err != nil {
				return err
			}
			defer a.closeDB(db) // through the operator socket, the server's own ledger stays open
			signed, cp, err := audit.CreateCheckpoint(cmd.Context(), db, key)
			if err != nil {
				return err
			}
			if opts.out != "" {
				if err := writeFileAtomic(opts.out, signed, 0o644); err != nil {
					return err
				}
			}
			return a.print(cmd, newCheckpointJSON(cp, signed), func(w io.Writer) error {
				if opts.out != "" {
					_, err := fmt.Fprintf(w, "checkpoint of %s written to %s\n", plural(int64(cp.Size), "chain", "chains"), opts.out)
					return err
				}
				_, err := w.Write(signed)
				return err
			})
		},
	}
	cmd.Flags().StringVar(&opts.key, "key", "", "the signing key file (from keygen)")
	cmd.Flags().StringVar(&opts.out, "out", "", "write the signed checkpoint to this file instead of printing it")
	cmd.Flags().DurationVar(&opts.every, "every", 0, "publish a new checkpoint to --out this often until interrupted")
	return cmd
}

// runPublisher runs an audit.Publisher until the command is interrupted.
func runPublisher(cmd *cobra.Command, a *app, key string, opts checkpointOptions) error {
	if opts.out == "" {
		return usageErrorf("--every needs --out FILE")
	}
	if opts.every < audit.IntervalMin {
		return usageErrorf("--every %v is below %v", opts.every, audit.IntervalMin)
	}
	ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	db, err := a.openDB(ctx, false)
	if err != nil {
		return err
	}
	defer db.Close()
	p := &audit.Publisher{DB: db, SignerKey: key, Interval: opts.every,
		Publish: func(ctx context.Context, signed []byte, cp checkpoint.Checkpoint) error {
			if err := writeFileAtomic(opts.out, signed, 0o644); err != nil {
				return err
			}
			return a.print(cmd, newCheckpointJSON(cp, nil), func(w io.Writer) error {
				_, err := fmt.Fprintf(w, "%s checkpoint of %s, root %x, written to %s\n",
					time.Now().UTC().Format(time.RFC3339), plural(int64(cp.Size), "chain", "chains"), cp.Root, opts.out)
				return err
			})
		}}
	if err := p.Start(ctx); err != nil {
		return err
	}
	<-ctx.Done()
	stopCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return p.Stop(stopCtx)
}
