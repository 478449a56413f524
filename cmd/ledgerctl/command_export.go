package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/ledgerworks/ledger/chain"
)

func init() { registerCommand(newExportCommand) }

// exportOptions are the flags of export.
type exportOptions struct {
	out string
	all bool
}

// exportJSON is the shape `export --out FILE -o json` prints.
type exportJSON struct {
	Out     string     `json:"out"`
	Chains  int        `json:"chains"`
	Entries int64      `json:"entries"`
	Heads   []headJSON `json:"heads"`
}

func newExportCommand(a *app) *cobra.Command {
	opts := exportOptions{}
	cmd := &cobra.Command{
		Use:   "export CHAIN... [--out FILE] | export --all [--out FILE]",
		Short: "Write chains as Format v1 JSON Lines (standard output by default)",
		Long: "export writes every entry of the named chains (of every chain with --all), chain after chain,\n" +
			"each in seq order, as Format v1 JSON Lines (docs/FORMAT.md). Without --out the lines go to\n" +
			"standard output and nothing else is printed there. With --out the file (mode 0600) appears\n" +
			"only once complete, and a summary with each chain's head is printed: keep the heads to\n" +
			"check the export later with `verify --file FILE --expect-head CHAIN:SEQ:HASH`.",
		RunE: func(cmd *cobra.Command, args []string) error {
			return runExport(cmd, a, opts, args)
		},
	}
	cmd.Flags().StringVar(&opts.out, "out", "", "write to this file instead of standard output")
	cmd.Flags().BoolVar(&opts.all, "all", false, "export every chain")
	return cmd
}

func runExport(cmd *cobra.Command, a *app, opts exportOptions, chains []string) error {
	switch {
	case opts.all && len(chains) > 0:
		return usageErrorf("export: name chains or give --all, not both")
	case !opts.all && len(chains) == 0:
		return usageErrorf("export: name at least one chain, or give --all")
	}
	seen := map[string]bool{}
	for _, c := range chains {
		if err := chain.ValidateChain(c); err != nil {
			return err
		}
		if seen[c] {
			return usageErrorf("export: chain %q named twice", c)
		}
		seen[c] = true
	}
	if opts.out != "" {
		if err := checkOutputPath(a.databaseName(), opts.out); err != nil {
			return err
		}
	}
	ctx := cmd.Context()
	db, err := a.openDB(ctx, true)
	if err != nil {
		return err
	}
	defer db.Close()
	heads, err := exportHeads(ctx, db, chains, opts.all)
	if err != nil {
		return err
	}
	names := make([]string, len(heads))
	var total int64
	for i, h := range heads {
		names[i] = h.Chain
		total += int64(h.Seq)
	}
	if opts.out == "" {
		bar := newProgress(cmd, "exporting", total)
		defer bar.finish()
		_, err := db.Export(ctx, cmd.OutOrStdout(), names, bar.set)
		return err
	}
	n, err := exportToFile(cmd, db, opts.out, names, total)
	if err != nil {
		return err
	}
	out := exportJSON{Out: opts.out, Chains: len(names), Entries: n, Heads: make([]headJSON, len(heads))}
	for i, h := range heads {
		out.Heads[i] = newHeadJSON(h)
	}
	return a.print(cmd, out, func(w io.Writer) error {
		fmt.Fprintf(w, "exported %s, %s to %s\n", plural(int64(out.Chains), "chain", "chains"), plural(n, "entry", "entries"), opts.out)
		for _, h := range heads {
			fmt.Fprintf(w, "head %s:%d:%s\n", h.Chain, h.Seq, h.Hash)
		}
		return nil
	})
}

// exportHeads returns the heads of the chains to export, checking that each
// exists before anything is written.
func exportHeads(ctx context.Context, db *chain.DB, chains []string, all bool) ([]chain.Head, error) {
	var heads []chain.Head
	if all {
		for h, err := range db.Chains(ctx, "") {
			if err != nil {
				return nil, err
			}
			heads = append(heads, h)
		}
		return heads, nil
	}
	for _, c := range chains {
		h, err := db.Head(ctx, c)
		if err != nil {
			return nil, err
		}
		heads = append(heads, h)
	}
	return heads, nil
}

// exportToFile writes the export next to path and renames it into place
// once complete, so that a failed export leaves no partial file behind.
func exportToFile(cmd *cobra.Command, db *chain.DB, path string, names []string, total int64) (int64, error) {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".partial-")
	if err != nil {
		return 0, fmt.Errorf("export: %w", err)
	}
	keep := false
	defer func() {
		if !keep {
			f.Close()
			os.Remove(f.Name())
		}
	}()
	bar := newProgress(cmd, "exporting", total)
	defer bar.finish()
	n, err := db.Export(cmd.Context(), f, names, bar.set)
	if err != nil {
		return n, err
	}
	if err := f.Sync(); err != nil {
		return n, fmt.Errorf("export %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return n, fmt.Errorf("export %s: %w", path, err)
	}
	if err := os.Rename(f.Name(), path); err != nil {
		return n, fmt.Errorf("export %s: %w", path, err)
	}
	keep = true
	return n, nil
}
