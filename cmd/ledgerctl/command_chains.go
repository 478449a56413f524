package main

import (
	"bufio"
	"fmt"

	"github.com/spf13/cobra"
)

func init() { registerCommand(newChainsCommand) }

func newChainsCommand(a *app) *cobra.Command {
	return &cobra.Command{
		Use:   "chains",
		Short: "List every chain with its head, in byte order of the chain ids",
		Long: "chains lists every chain with its head. Text output has one line per chain:\n" +
			"SEQ HASH CHAIN. JSON output is {\"chains\":[{\"chain\",\"seq\",\"hash\"}…]}, streamed.",
		Args: noArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			db, err := a.openDB(cmd.Context(), true)
			if err != nil {
				return err
			}
			defer db.Close()
			// Streamed: a ledger may hold more chains than fit in memory at once.
			w := bufio.NewWriter(cmd.OutOrStdout())
			asJSON := a.output == outputJSON
			first := true
			if asJSON {
				w.WriteString(`{"chains":[`)
			}
			for h, err := range db.Chains(cmd.Context(), "") {
				if err != nil {
					return err
				}
				if asJSON {
					if !first {
						w.WriteString(",")
					}
					if err := writeJSONValue(w, newHeadJSON(h)); err != nil {
						return err
					}
				} else {
					fmt.Fprintf(w, "%d\t%s\t%s\n", h.Seq, h.Hash, h.Chain)
				}
				first = false
			}
			if asJSON {
				w.WriteString("]}\n")
			}
			return w.Flush()
		},
	}
}
