package main

import (
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"

	"github.com/ledgerworks/ledger/checkpoint"
)

func init() { registerCommand(newKeygenCommand) }

type keygenOptions struct {
	key, pub string
}

type keygenJSON struct {
	Origin      string `json:"origin"`
	KeyFile     string `json:"key_file"`
	PubFile     string `json:"pub_file"`
	VerifierKey string `json:"verifier_key"`
}

func newKeygenCommand(a *app) *cobra.Command {
	opts := keygenOptions{}
	cmd := &cobra.Command{
		Use:   "keygen ORIGIN [--key FILE] [--pub FILE]",
		Short: "Make an Ed25519 key pair that signs checkpoints of the origin ORIGIN",
		Long: "keygen writes a signing key (--key, readable by its owner only) and its verifier key\n" +
			"(--pub, for auditors) in the text forms of golang.org/x/mod/sumdb/note, both named ORIGIN,\n" +
			"the first line of every checkpoint they sign (for example ledger.example.com/erp). It never\n" +
			"overwrites a file.",
		Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			signer, verifier, err := checkpoint.GenerateKey(args[0])
			if err != nil {
				return invalidInputf("%w", err)
			}
			if err := createFile(opts.key, []byte(signer+"\n"), 0o600); err != nil {
				return err
			}
			if err := createFile(opts.pub, []byte(verifier+"\n"), 0o644); err != nil {
				os.Remove(opts.key)
				return err
			}
			out := keygenJSON{Origin: args[0], KeyFile: opts.key, PubFile: opts.pub, VerifierKey: verifier}
			return a.print(cmd, out, func(w io.Writer) error {
				_, err := fmt.Fprintf(w, "signing key %s, verifier key %s:\n%s\n", opts.key, opts.pub, verifier)
				return err
			})
		},
	}
	cmd.Flags().StringVar(&opts.key, "key", "checkpoint.key", "file for the signing key (kept secret)")
	cmd.Flags().StringVar(&opts.pub, "pub", "checkpoint.pub", "file for the verifier key (given to auditors)")
	return cmd
}

// createFile writes a new file; an existing one is an input error.
func createFile(name string, b []byte, perm os.FileMode) error {
	f, err := os.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
	if errors.Is(err, os.ErrExist) {
		return invalidInputf("%s exists; keygen does not overwrite a key", name)
	}
	if err != nil {
		return err
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
