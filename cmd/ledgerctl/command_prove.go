package main

import (
	"fmt"
	"strconv"

	"github.com/spf13/cobra"

	"github.com/ledgerworks/ledger/audit"
)

func init() { registerCommand(newProveCommand) }

type proveOptions struct {
	checkpoint string
	pub        string
	out        string
}

func newProveCommand(a *app) *cobra.Command {
	opts := &proveOptions{}
	cmd := &cobra.Command{
		Use:   "prove entry|consistency",
		Short: "Write a proof, for an auditor, against checkpoints made from this ledger",
		Long: "prove writes a JSON proof that `ledgerctl verify-proof` (or any RFC 9162 verifier, see\n" +
			"docs/PROOFS.md) checks without the ledger. --pub checks the checkpoints' signatures first.",
	}
	entry := &cobra.Command{
		Use:   "entry CHAIN SEQ --checkpoint FILE [--out FILE]",
		Short: "Prove that the entry at CHAIN SEQ is in the signed checkpoint",
		Args:  exactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			seq, err := strconv.ParseUint(args[1], 10, 64)
			if err != nil || seq == 0 {
				return usageErrorf("SEQ %q is not a positive integer", args[1])
			}
			if opts.checkpoint == "" {
				return usageErrorf("--checkpoint FILE is required")
			}
			signed, pub, err := opts.read(opts.checkpoint)
			if err != nil {
				return err
			}
			db, err := a.openDB(cmd.Context(), true)
			if err != nil {
				return err
			}
			defer db.Close()
			p, err := audit.ProveEntry(cmd.Context(), db, signed, pub, args[0], seq)
			if err != nil {
				return err
			}
			b, err := p.Marshal()
			if err != nil {
				return err
			}
			return opts.write(cmd, b, fmt.Sprintf("proof of %s seq %d", args[0], seq))
		},
	}
	consistency := &cobra.Command{
		Use:   "consistency OLD NEW [--out FILE]",
		Short: "Prove that the checkpoint file NEW extends the checkpoint file OLD",
		Args:  exactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			old, pub, err := opts.read(args[0])
			if err != nil {
				return err
			}
			newer, err := readProofFile(args[1])
			if err != nil {
				return err
			}
			db, err := a.openDB(cmd.Context(), true)
			if err != nil {
				return err
			}
			defer db.Close()
			p, err := audit.ProveConsistency(cmd.Context(), db, old, newer, pub)
			if err != nil {
				return err
			}
			b, err := p.Marshal()
			if err != nil {
				return err
			}
			return opts.write(cmd, b, "consistency proof of "+plural(int64(len(p.Chains)), "chain", "chains"))
		},
	}
	entry.Flags().StringVar(&opts.checkpoint, "checkpoint", "", "the signed checkpoint file (from `ledgerctl checkpoint`)")
	for _, c := range []*cobra.Command{entry, consistency} {
		c.Flags().StringVar(&opts.pub, "pub", "", "check the checkpoints' signatures with this verifier key file first")
		c.Flags().StringVar(&opts.out, "out", "", "write the proof to this file instead of printing it")
	}
	cmd.AddCommand(entry, consistency)
	return cmd
}

// read reads a checkpoint file and, when --pub is set, the verifier key.
func (o *proveOptions) read(name string) (signed []byte, pub string, err error) {
	if signed, err = readProofFile(name); err != nil {
		return nil, "", err
	}
	if o.pub != "" {
		if pub, err = readKeyFile(o.pub, "--pub", verifierKey); err != nil {
			return nil, "", err
		}
	}
	return signed, pub, nil
}

// write prints the proof, or writes it to --out and says so.
func (o *proveOptions) write(cmd *cobra.Command, b []byte, what string) error {
	w := cmd.OutOrStdout()
	if o.out == "" {
		_, err := w.Write(b)
		return err
	}
	if err := writeFileAtomic(o.out, b, 0o644); err != nil {
		return err
	}
	_, err := fmt.Fprintf(w, "%s written to %s (%d bytes)\n", what, o.out, len(b))
	return err
}
