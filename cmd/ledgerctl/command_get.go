package main

import (
	"io"

	"github.com/spf13/cobra"
)

func init() { registerCommand(newGetCommand) }

func newGetCommand(a *app) *cobra.Command {
	return &cobra.Command{
		Use:   "get CHAIN SEQ",
		Short: "Print one entry, payload included",
		Args:  exactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			seq, err := parseSeq("SEQ", args[1])
			if err != nil {
				return err
			}
			db, err := a.openDB(cmd.Context(), true)
			if err != nil {
				return err
			}
			defer db.Close()
			e, err := db.Get(cmd.Context(), args[0], seq)
			if err != nil {
				return err
			}
			return a.print(cmd, newEntryJSON(&e), func(w io.Writer) error {
				return writeEntryText(w, &e, true, nil)
			})
		},
	}
}
