package main

import (
	"errors"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/ledgerworks/ledger/storage/postgres"
)

func init() { registerCommand(newInitCommand) }

// initJSON is the shape `init -o json` prints.
type initJSON struct {
	Path    string `json:"path"`
	Created bool   `json:"created"`
}

func newInitCommand(a *app) *cobra.Command {
	return &cobra.Command{
		Use:   "init",
		Short: "Create a ledger file (mode 0600); an existing ledger is left unchanged",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			// An existing ledger is opened read-only, so that not a byte of
			// it changes; that also checks it is a ledger. A PostgreSQL
			// database without the current schema gets it.
			db, err := a.openDB(cmd.Context(), true)
			created := errors.Is(err, errLedgerMissing) || errors.Is(err, postgres.ErrSchemaVersion)
			if created {
				db, created, err = a.createDB(cmd.Context())
			}
			if err != nil {
				return err
			}
			if err := db.Close(); err != nil {
				return err
			}
			out := initJSON{Path: displayName(a.databaseName()), Created: created}
			return a.print(cmd, out, func(w io.Writer) error {
				if created {
					_, err := fmt.Fprintf(w, "created ledger %s\n", out.Path)
					return err
				}
				_, err := fmt.Fprintf(w, "ledger %s already exists; nothing changed\n", out.Path)
				return err
			})
		},
	}
}
