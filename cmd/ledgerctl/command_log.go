package main

import (
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/ledgerworks/ledger/chain"
)

func init() { registerCommand(newLogCommand) }

// Limits of log.
const (
	// logLimitDefault is how many entries log prints without --limit.
	logLimitDefault = 100
	// logLimitMax bounds --limit: log holds the page it prints in memory.
	logLimitMax = 100_000
	// logPageBytesMax bounds the payload bytes of one page; a page that
	// reaches it ends early, and next_seq says where the next one starts.
	logPageBytesMax = 64 << 20
)

// logOptions are the flags of log.
type logOptions struct {
	from  uint64
	limit int
}

// logJSON is the shape `log -o json` prints.
type logJSON struct {
	Chain   string      `json:"chain"`
	Entries []entryJSON `json:"entries"`
	// NextSeq is the --from of the next page, 0 when the chain has no more.
	NextSeq uint64 `json:"next_seq"`
}

func newLogCommand(a *app) *cobra.Command {
	opts := logOptions{}
	cmd := &cobra.Command{
		Use:   "log CHAIN [--from SEQ] [--limit N]",
		Short: "Print a chain's entries in seq order, a page at a time",
		Long: "log prints up to --limit entries of CHAIN from seq --from. Text output has one line per\n" +
			"entry (SEQ TIME TYPE KEY HASH) and, when more entries follow, the command for the next page.",
		Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runLog(cmd, a, opts, args[0])
		},
	}
	cmd.Flags().Uint64Var(&opts.from, "from", 1, "first seq to print")
	cmd.Flags().IntVar(&opts.limit, "limit", logLimitDefault, fmt.Sprintf("most entries to print (1 to %d)", logLimitMax))
	return cmd
}

func runLog(cmd *cobra.Command, a *app, opts logOptions, chainName string) error {
	if opts.from == 0 {
		return usageErrorf("--from 0: seqs start at 1")
	}
	if opts.limit < 1 || opts.limit > logLimitMax {
		return usageErrorf("--limit %d: want 1 to %d", opts.limit, logLimitMax)
	}
	ctx := cmd.Context()
	db, err := a.openDB(ctx, true)
	if err != nil {
		return err
	}
	defer db.Close()
	head, err := db.Head(ctx, chainName)
	if err != nil {
		return err
	}
	out := logJSON{Chain: chainName, Entries: []entryJSON{}}
	var entries []chain.Entry
	pageBytes := 0
	for e, err := range db.Entries(ctx, chainName, opts.from) {
		if err != nil {
			return err
		}
		if len(entries) == opts.limit || len(entries) > 0 && pageBytes+len(e.Payload) > logPageBytesMax {
			break
		}
		pageBytes += len(e.Payload)
		entries = append(entries, e)
		out.Entries = append(out.Entries, newEntryJSON(&e))
	}
	if n := len(entries); n > 0 && entries[n-1].Seq < head.Seq {
		out.NextSeq = entries[n-1].Seq + 1
	}
	return a.print(cmd, out, func(w io.Writer) error {
		tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
		fmt.Fprintf(tw, "SEQ\tTIME\tTYPE\tKEY\tHASH\n")
		for _, e := range entries {
			fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\n", e.Seq, formatTime(e.TimeUnixNano), e.Type, e.IdempotencyKey, e.Hash)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
		if out.NextSeq != 0 {
			_, err := fmt.Fprintf(w, "more: ledgerctl log %s --from %d --limit %d\n", shellQuote(chainName), out.NextSeq, opts.limit)
			return err
		}
		return nil
	})
}
