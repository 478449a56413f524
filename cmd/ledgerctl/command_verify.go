package main

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/ledgerworks/ledger/api"
	"github.com/ledgerworks/ledger/chain"
	"github.com/ledgerworks/ledger/internal/wire"
)

func init() { registerCommand(newVerifyCommand) }

// expectHeadsMax bounds the --expect-head flags of one run.
const expectHeadsMax = 10_000

// verifyOptions are the flags of verify.
type verifyOptions struct {
	file        string
	expectHeads []string
	checkpoint  string // a signed checkpoint the ledger must extend
	key         string // its verifier key file
	trees       bool   // also check the stored Merkle trees
}

// verifyJSON is the shape `verify -o json` prints: the HTTP API's
// POST /v1/verify answer (api, built by internal/wire).
type (
	verifyJSON  = api.VerifyReport
	failureJSON = api.VerifyFailure
)

var newVerifyJSON = wire.VerifyReport

func newVerifyCommand(a *app) *cobra.Command {
	opts := verifyOptions{}
	cmd := &cobra.Command{
		Use:   "verify [CHAIN...] [--file EXPORT.jsonl] [--expect-head CHAIN:SEQ:HASH]...",
		Short: "Prove that chains (or an export) are intact; exit 1 when anything is broken",
		Long: "verify checks every entry of the named chains (every chain when none is named): each hash\n" +
			"against the entry's fields, each prev_hash against the previous entry, seqs without gaps and\n" +
			"each chain's end against its stored head. With no chain named it also runs the domain\n" +
			"packages' derived-state checks. --file checks an export instead, with no database.\n\n" +
			"--expect-head CHAIN:SEQ:HASH (as printed by `ledgerctl head`) also proves that the chain still\n" +
			"holds that entry with that hash: this catches truncation and wholesale rewrites.\n\n" +
			"A state_mismatch with intact chains means the derived state (balances, indexes, layers) differs\n" +
			"from what the chains say; `ledgerctl rebuild-state` recomputes it from the chains.\n\n" +
			"Exit 0 when intact, 1 when anything is broken.",
		RunE: func(cmd *cobra.Command, args []string) error {
			return runVerify(cmd, a, opts, args)
		},
	}
	cmd.Flags().StringVar(&opts.file, "file", "", "verify this export (Format v1 JSON Lines; - for standard input) instead of the database")
	cmd.Flags().StringArrayVar(&opts.expectHeads, "expect-head", nil, "CHAIN:SEQ:HASH the chain must still hold (repeatable)")
	cmd.Flags().StringVar(&opts.checkpoint, "checkpoint", "", "a signed checkpoint (from `ledgerctl checkpoint`) the ledger must extend; needs --key")
	cmd.Flags().StringVar(&opts.key, "key", "", "the verifier key file of --checkpoint")
	cmd.Flags().BoolVar(&opts.trees, "trees", false, "also check every chain's stored Merkle tree against its entries (a second pass)")
	return cmd
}

func runVerify(cmd *cobra.Command, a *app, opts verifyOptions, chains []string) error {
	heads, err := parseExpectHeads(opts.expectHeads)
	if err != nil {
		return err
	}
	for _, c := range chains {
		if err := chain.ValidateChain(c); err != nil {
			return err
		}
	}
	chains = slices.Compact(slices.Sorted(slices.Values(chains))) // each chain once, in report order
	var report chain.Report
	if cmd.Flags().Changed("file") {
		if opts.checkpoint != "" {
			return usageErrorf("verify --file checks an export; --checkpoint needs the ledger")
		}
		if len(chains) > 0 {
			return usageErrorf("verify --file checks the whole export; name no chains with it")
		}
		report, err = verifyFile(cmd, opts.file, heads)
	} else {
		report, err = verifyLedger(cmd, a, chains, heads, opts)
	}
	if err != nil {
		return err
	}
	if err := a.print(cmd, newVerifyJSON(&report), func(w io.Writer) error { return writeReportText(w, &report) }); err != nil {
		return err
	}
	if !report.OK() {
		return fmt.Errorf("%w: %s in %s", errVerificationFailed, plural(int64(len(report.Failures)), "failure", "failures"),
			plural(report.Chains, "chain", "chains"))
	}
	return nil
}

func verifyLedger(cmd *cobra.Command, a *app, chains []string, heads []chain.Head, vo verifyOptions) (chain.Report, error) {
	ctx := cmd.Context()
	db, err := a.openDB(ctx, true)
	if err != nil {
		return chain.Report{}, err
	}
	defer db.Close()
	trees, err := checkpointTrees(cmd, db, vo)
	if err != nil {
		return chain.Report{}, err
	}
	if err := requireChains(ctx, db, chains, heads); err != nil {
		return chain.Report{}, err
	}
	total, err := entriesTotal(ctx, db, chains)
	if err != nil {
		return chain.Report{}, err
	}
	bar := newProgress(cmd, "verifying", total)
	defer bar.finish()
	opts := chain.VerifyOptions{Chains: chains, ExpectHeads: heads, ExpectTrees: trees, Trees: vo.trees,
		Progress: func(p chain.Progress) { bar.set(p.Entries) }}
	return verifyDatabase(ctx, db, opts, registeredChecks(), len(chains) == 0)
}

// requireChains fails with ErrNotFound for a named chain that does not
// exist, unless a saved head names it: then the chain's absence is a
// verification failure (it was deleted), which Verify reports.
func requireChains(ctx context.Context, db *chain.DB, chains []string, heads []chain.Head) error {
	saved := map[string]bool{}
	for _, h := range heads {
		saved[h.Chain] = true
	}
	for _, c := range chains {
		if _, err := db.Head(ctx, c); err != nil && !(isNotFound(err) && saved[c]) {
			return err
		}
	}
	return nil
}

// entriesTotal counts the entries of the chains (every chain when none is
// named) from their heads, for a progress bar; a missing chain counts 0.
func entriesTotal(ctx context.Context, db *chain.DB, chains []string) (int64, error) {
	var total int64
	if len(chains) == 0 {
		s, err := db.Stats(ctx)
		return s.Entries, err
	}
	for _, c := range chains {
		h, err := db.Head(ctx, c)
		if err != nil && !isNotFound(err) {
			return 0, err
		}
		total += int64(h.Seq)
	}
	return total, nil
}

// verifyDatabase verifies the ledger and, when withChecks is set, runs the
// domain packages' derived-state checks, merging their failures in chain and
// seq order.
func verifyDatabase(ctx context.Context, db *chain.DB, opts chain.VerifyOptions, checks []registeredCheck, withChecks bool) (chain.Report, error) {
	report, err := db.Verify(ctx, opts)
	if err != nil || !withChecks {
		return report, err
	}
	for _, c := range checks {
		failures, err := c.check(ctx, db)
		if err != nil {
			return report, fmt.Errorf("%s check: %w", c.name, err)
		}
		report.Failures = append(report.Failures, failures...)
	}
	slices.SortStableFunc(report.Failures, func(x, y chain.Failure) int {
		return cmp.Or(strings.Compare(x.Chain, y.Chain), cmp.Compare(x.Seq, y.Seq))
	})
	return report, nil
}

func verifyFile(cmd *cobra.Command, name string, heads []chain.Head) (chain.Report, error) {
	r, closeFile, err := openInput(cmd, name)
	if err != nil {
		return chain.Report{}, err
	}
	defer closeFile()
	bar := newProgress(cmd, "verifying "+name, -1)
	defer bar.finish()
	report, err := chain.VerifyExport(cmd.Context(), r, chain.VerifyOptions{ExpectHeads: heads,
		Progress: func(p chain.Progress) { bar.set(p.Entries) }})
	if err != nil {
		return report, fmt.Errorf("verify %s: %w", name, err)
	}
	return report, nil
}

// openInput opens a file the user names for reading; "-" is standard input.
func openInput(cmd *cobra.Command, name string) (io.Reader, func(), error) {
	if name == "-" {
		return cmd.InOrStdin(), func() {}, nil
	}
	if name == "" {
		return nil, nil, usageErrorf("--file: give a file name, or - for standard input")
	}
	f, err := os.Open(name)
	if err != nil {
		return nil, nil, invalidInputf("%v", err)
	}
	return f, func() { f.Close() }, nil
}

// parseExpectHeads parses CHAIN:SEQ:HASH values. The chain id may itself
// hold colons: the last two fields are the seq and the hash.
func parseExpectHeads(values []string) ([]chain.Head, error) {
	if len(values) > expectHeadsMax {
		return nil, usageErrorf("--expect-head given %d times, at most %d", len(values), expectHeadsMax)
	}
	heads := make([]chain.Head, 0, len(values))
	for _, v := range values {
		hashAt := strings.LastIndexByte(v, ':')
		if hashAt < 0 {
			return nil, usageErrorf("--expect-head %q: want CHAIN:SEQ:HASH", v)
		}
		seqAt := strings.LastIndexByte(v[:hashAt], ':')
		if seqAt <= 0 {
			return nil, usageErrorf("--expect-head %q: want CHAIN:SEQ:HASH", v)
		}
		name, seqText, hashText := v[:seqAt], v[seqAt+1:hashAt], v[hashAt+1:]
		if err := chain.ValidateChain(name); err != nil {
			return nil, usageErrorf("--expect-head %q: %v", v, err)
		}
		seq, err := strconv.ParseUint(seqText, 10, 64)
		if err != nil || seq == 0 || strconv.FormatUint(seq, 10) != seqText {
			return nil, usageErrorf("--expect-head %q: seq %q is not a number from 1", v, seqText)
		}
		hash, err := chain.ParseHash(hashText)
		if err != nil {
			return nil, usageErrorf("--expect-head %q: %v", v, err)
		}
		heads = append(heads, chain.Head{Chain: name, Seq: seq, Hash: hash})
	}
	return heads, nil
}

// writeReportText prints a verification report: a verdict line, then one
// line per failure.
func writeReportText(w io.Writer, r *chain.Report) error {
	counts := fmt.Sprintf("%s, %s", plural(r.Chains, "chain", "chains"), plural(r.Entries, "entry", "entries"))
	if r.OK() {
		_, err := fmt.Fprintf(w, "intact: %s verified\n", counts)
		return err
	}
	fmt.Fprintf(w, "BROKEN: %s in %s\n", plural(int64(len(r.Failures)), "failure", "failures"), counts)
	var zero chain.Hash
	for _, f := range r.Failures {
		fmt.Fprintf(w, "%s seq %d: %s: %s", f.Chain, f.Seq, f.Reason, f.Detail)
		switch {
		case f.Expected != zero && f.Calculated != zero:
			fmt.Fprintf(w, " (expected %s, calculated %s)", f.Expected, f.Calculated)
		case f.Expected != zero:
			fmt.Fprintf(w, " (expected %s)", f.Expected)
		}
		fmt.Fprintln(w)
	}
	if r.Truncated {
		fmt.Fprintf(w, "more failures were found than listed\n")
	}
	return nil
}
