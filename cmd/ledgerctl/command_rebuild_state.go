package main

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/ledgerworks/ledger/chain"
	"github.com/ledgerworks/ledger/financial"
	"github.com/ledgerworks/ledger/outbox"
	"github.com/ledgerworks/ledger/stockmovement"
	"github.com/ledgerworks/ledger/valuations"
)

func init() { registerCommand(newRebuildStateCommand) }

// stateRebuilder is a domain package's Rebuild, named by the domain
// component of its chain ids.
type stateRebuilder struct {
	domain  string
	rebuild func(ctx context.Context, db *chain.DB) (rebuildJSON, error)
}

// stateRebuilders are the domains whose derived state can be rebuilt, in
// the order rebuild-state runs them.
var stateRebuilders = []stateRebuilder{
	{financial.Domain, func(ctx context.Context, db *chain.DB) (rebuildJSON, error) {
		s, err := financial.Rebuild(ctx, db)
		return newRebuildJSON(financial.Domain, s.Transactions, s.Entries, s.Written, s.Deleted, s.Failures), err
	}},
	{stockmovement.Domain, func(ctx context.Context, db *chain.DB) (rebuildJSON, error) {
		s, err := stockmovement.Rebuild(ctx, db)
		return newRebuildJSON(stockmovement.Domain, s.Transactions, s.Entries, s.Written, s.Deleted, s.Failures), err
	}},
	{valuations.Domain, func(ctx context.Context, db *chain.DB) (rebuildJSON, error) {
		s, err := valuations.Rebuild(ctx, db)
		return newRebuildJSON(valuations.Domain, s.Transactions, s.Entries, s.Written, s.Deleted, s.Failures), err
	}},
	{outbox.Domain, func(ctx context.Context, db *chain.DB) (rebuildJSON, error) {
		s, err := outbox.Rebuild(ctx, db)
		return newRebuildJSON(outbox.Domain, s.Tenants, s.Entries, s.Written, s.Deleted, s.Failures), err
	}},
}

// rebuildJSON is what the rebuild of one domain did.
type rebuildJSON struct {
	Domain       string `json:"domain"`
	Transactions int64  `json:"transactions"`
	Entries      int64  `json:"entries"`
	Written      int64  `json:"written"`
	Deleted      int64  `json:"deleted"`
	// Failures are entries that break a rule of the domain: their state
	// cannot be rebuilt, and verify keeps reporting them.
	Failures []failureJSON `json:"failures"`
}

func newRebuildJSON(domain string, transactions, entries, written, deleted int64, failures []chain.Failure) rebuildJSON {
	out := rebuildJSON{Domain: domain, Transactions: transactions, Entries: entries, Written: written, Deleted: deleted,
		Failures: []failureJSON{}}
	for _, f := range failures {
		out.Failures = append(out.Failures, failureJSON{Chain: f.Chain, Seq: f.Seq, Reason: string(f.Reason), Detail: f.Detail})
	}
	return out
}

// rebuildStateJSON is the shape `rebuild-state -o json` prints.
type rebuildStateJSON struct {
	OK      bool          `json:"ok"`
	Domains []rebuildJSON `json:"domains"`
}

// rebuildStateOptions are the flags of rebuild-state.
type rebuildStateOptions struct {
	domains []string
}

func newRebuildStateCommand(a *app) *cobra.Command {
	opts := rebuildStateOptions{}
	cmd := &cobra.Command{
		Use:   "rebuild-state [--domain stock|fin|val|outbox|apikey]...",
		Short: "Rebuild the domain packages' derived state (balances, indexes, layers) from the chains",
		Long: "rebuild-state recomputes the derived state of the stock, fin, val, outbox and apikey domains (or of the\n" +
			"domains named with --domain) from their chains, exactly as verify's state checks compute it,\n" +
			"and writes it in place of the stored state; state that belongs to no chain is deleted. Each\n" +
			"item, location or book is rebuilt in a write transaction of its own. Use it after restoring\n" +
			"state from elsewhere or when verify reports state_mismatch that a bug left behind; import\n" +
			"runs it for the domains it imports.\n\n" +
			"Exit 0 when every domain's state was rebuilt, 1 when entries break a rule of their domain:\n" +
			"they are listed, their state cannot be rebuilt and verify keeps reporting them.",
		Args: noArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return runRebuildState(cmd, a, opts)
		},
	}
	cmd.Flags().StringArrayVar(&opts.domains, "domain", nil, "rebuild only this domain: stock, fin, val, outbox or apikey (repeatable)")
	return cmd
}

func runRebuildState(cmd *cobra.Command, a *app, opts rebuildStateOptions) error {
	domains := map[string]bool{}
	for _, d := range opts.domains {
		if !slices.ContainsFunc(stateRebuilders, func(r stateRebuilder) bool { return r.domain == d }) {
			return usageErrorf("--domain %q: want stock, fin, val, outbox or apikey", d)
		}
		domains[d] = true
	}
	ctx := cmd.Context()
	db, err := a.openDB(ctx, false)
	if err != nil {
		return err
	}
	defer db.Close()
	out, err := rebuildDomains(ctx, db, func(domain string) bool { return len(domains) == 0 || domains[domain] })
	if err != nil {
		return err
	}
	if err := db.Close(); err != nil {
		return err
	}
	if err := a.print(cmd, out, func(w io.Writer) error { return writeRebuildText(w, out.Domains) }); err != nil {
		return err
	}
	return rebuildFailed(out)
}

// rebuildDomains rebuilds the state of the domains selected, in the order
// of stateRebuilders.
func rebuildDomains(ctx context.Context, db *chain.DB, selected func(domain string) bool) (rebuildStateJSON, error) {
	out := rebuildStateJSON{OK: true, Domains: []rebuildJSON{}}
	for _, r := range stateRebuilders {
		if !selected(r.domain) {
			continue
		}
		stats, err := r.rebuild(ctx, db)
		if err != nil {
			return out, fmt.Errorf("rebuilding the %s state: %w", r.domain, err)
		}
		out.OK = out.OK && len(stats.Failures) == 0
		out.Domains = append(out.Domains, stats)
	}
	return out, nil
}

// rebuildFailed is the error of a rebuild that left entries it could not
// rebuild (printed already), or nil.
func rebuildFailed(out rebuildStateJSON) error {
	var count int64
	var names []string
	for _, d := range out.Domains {
		if len(d.Failures) > 0 {
			count += int64(len(d.Failures))
			names = append(names, d.Domain)
		}
	}
	if count == 0 {
		return nil
	}
	return fmt.Errorf("%w: %s of %s break a rule of their domain; their state was not rebuilt", errVerificationFailed,
		plural(count, "entry", "entries"), strings.Join(names, ", "))
}

// writeRebuildText prints one line per domain and its failures.
func writeRebuildText(w io.Writer, domains []rebuildJSON) error {
	for _, d := range domains {
		_, err := fmt.Fprintf(w, "rebuilt %s state: %s, %s replayed, %d keys written, %d deleted\n", d.Domain,
			plural(d.Transactions, "transaction", "transactions"), plural(d.Entries, "entry", "entries"), d.Written, d.Deleted)
		if err != nil {
			return err
		}
		for _, f := range d.Failures {
			if _, err := fmt.Fprintf(w, "%s seq %d: %s: %s\n", f.Chain, f.Seq, f.Reason, f.Detail); err != nil {
				return err
			}
		}
	}
	return nil
}
