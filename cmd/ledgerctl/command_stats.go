package main

import (
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/spf13/cobra"
)

func init() { registerCommand(newStatsCommand) }

// statsJSON is the shape `stats -o json` prints.
type statsJSON struct {
	Chains int64 `json:"chains"`
	// Entries is the number of entries of every chain.
	Entries int64 `json:"entries"`
	// PayloadBytes is the sum of the payload sizes.
	PayloadBytes int64 `json:"payload_bytes"`
	// FileSizeBytes is the size of the file (or database) on disk.
	FileSizeBytes int64 `json:"file_size_bytes"`
}

func newStatsCommand(a *app) *cobra.Command {
	return &cobra.Command{
		Use:   "stats",
		Short: "Count chains, entries and payload bytes, and print the ledger's size on disk",
		Long: "stats counts the chains and entries (from the heads), sums the payload bytes (which reads\n" +
			"every entry) and prints the ledger's size on disk.",
		Args: noArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			db, err := a.openDB(ctx, true)
			if err != nil {
				return err
			}
			defer db.Close()
			s, err := db.Stats(ctx)
			if err != nil {
				return err
			}
			out := statsJSON{Chains: s.Chains, Entries: s.Entries, FileSizeBytes: s.SizeBytes}
			for h, err := range db.Chains(ctx, "") {
				if err != nil {
					return err
				}
				for e, err := range db.Entries(ctx, h.Chain, 1) {
					if err != nil {
						return err
					}
					out.PayloadBytes += int64(len(e.Payload))
				}
			}
			return a.print(cmd, out, func(w io.Writer) error {
				tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
				fmt.Fprintf(tw, "chains\t%d\n", out.Chains)
				fmt.Fprintf(tw, "entries\t%d\n", out.Entries)
				fmt.Fprintf(tw, "payload_bytes\t%d\n", out.PayloadBytes)
				fmt.Fprintf(tw, "file_size_bytes\t%d\n", out.FileSizeBytes)
				return tw.Flush()
			})
		},
	}
}
