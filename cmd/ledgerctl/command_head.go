package main

import (
	"fmt"
	"io"

	"github.com/spf13/cobra"
)

func init() { registerCommand(newHeadCommand) }

func newHeadCommand(a *app) *cobra.Command {
	return &cobra.Command{
		Use:   "head CHAIN",
		Short: "Print a chain's newest seq and hash (save it to check the chain later with verify --expect-head)",
		Args:  exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			db, err := a.openDB(cmd.Context(), true)
			if err != nil {
				return err
			}
			defer db.Close()
			h, err := db.Head(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			return a.print(cmd, newHeadJSON(h), func(w io.Writer) error {
				_, err := fmt.Fprintf(w, "%s:%d:%s\n", h.Chain, h.Seq, h.Hash)
				return err
			})
		},
	}
}
