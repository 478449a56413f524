package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"github.com/spf13/cobra"

	"github.com/ledgerworks/ledger/chain"
)

func init() { registerCommand(newDemoCommand) }

// demoTenant is the tenant every demo step records for.
const demoTenant = "acme"

// demoEnv is what a demo step works with.
type demoEnv struct {
	// DB is the demo's open ledger.
	DB *chain.DB
	// Out receives the demo's narration.
	Out io.Writer
	// Tenant scopes every chain the demo writes (chain.ScopedName).
	Tenant string
	// Path names the ledger (a file path or a redacted URL).
	Path string
	// checks are the registered derived-state checks, run by the final step.
	checks []registeredCheck

	// proofs carries the proof steps' key and first checkpoint (demo_proofs.go).
	proofs demoProofState

	// What the steps showed, for the final summary: retried requests that
	// replayed, idempotency conflicts, and requests refused by a rule.
	replays, conflicts, refusals int
	// stats are the ledger's counts, read by the verification step.
	stats chain.Stats
}

// Replayed counts n retried requests that returned their original entries.
func (d *demoEnv) Replayed(n int) { d.replays += n }

// Conflicted counts a reused key that was refused as a conflict.
func (d *demoEnv) Conflicted() { d.conflicts++ }

// Refused counts a request a rule refused (negative stock, unbalanced…).
func (d *demoEnv) Refused() { d.refusals++ }

// Printf narrates one line (or more) of the demo.
func (d *demoEnv) Printf(format string, args ...any) {
	fmt.Fprintf(d.Out, format, args...)
}

// demoStep is one registered part of the demo.
type demoStep struct {
	order int
	name  string
	run   func(ctx context.Context, d *demoEnv) error
}

var (
	demoMutex sync.Mutex
	demoSteps []demoStep
)

// registerDemoStep adds a step to `ledgerctl demo`. Steps run in ascending
// order (ties by name). Orders: 10–19 raw entries, 20–29 stock, 30–39
// financial, 40–59 valuations, 60–69 the HTTP replay guard, 70–79 outbox and
// inbox, 90 verification and summary. A step that
// returns an error ends the demo with that error.
func registerDemoStep(order int, name string, run func(ctx context.Context, d *demoEnv) error) {
	if order < 0 || name == "" || run == nil {
		panic(fmt.Sprintf("registerDemoStep(%d, %q): order must be >= 0, name and run set", order, name))
	}
	demoMutex.Lock()
	defer demoMutex.Unlock()
	for _, s := range demoSteps {
		if s.order == order && s.name == name {
			panic(fmt.Sprintf("registerDemoStep: step %d %q registered twice", order, name))
		}
	}
	demoSteps = append(demoSteps, demoStep{order: order, name: name, run: run})
}

// registeredDemoSteps returns the steps in the order they run.
func registeredDemoSteps() []demoStep {
	demoMutex.Lock()
	defer demoMutex.Unlock()
	steps := slices.Clone(demoSteps)
	slices.SortStableFunc(steps, func(a, b demoStep) int {
		if a.order != b.order {
			return a.order - b.order
		}
		if a.name < b.name {
			return -1
		}
		if a.name > b.name {
			return 1
		}
		return 0
	})
	return steps
}

// demoOptions are the demo's flags.
type demoOptions struct {
	// directory is where a fresh ledger is created when --db is not given;
	// the system's temporary folder when empty.
	directory string
}

func newDemoCommand(a *app) *cobra.Command {
	opts := demoOptions{}
	cmd := &cobra.Command{
		Use:   "demo",
		Short: "Record a small ERP day in a fresh ledger, show replays and a conflict, and verify",
		Long: "demo creates a fresh ledger (in a new temporary folder unless --db is given), records a small,\n" +
			"realistic ERP day through the engine, retries requests to show replays, shows an idempotency\n" +
			"conflict, sends a purchase receipt through the HTTP API and the Go client, verifies the ledger\n" +
			"and prints a summary. It prints the ledger's path first.",
		Args: noArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return runDemo(cmd, a, opts)
		},
	}
	cmd.Flags().StringVar(&opts.directory, "dir", "", "create the demo ledger in this folder (default: a new temporary folder)")
	return cmd
}

func runDemo(cmd *cobra.Command, a *app, opts demoOptions) error {
	ctx := cmd.Context()
	out := cmd.OutOrStdout()
	if !cmd.Flags().Changed("db") && !cmd.Root().PersistentFlags().Changed("db") {
		dir, err := os.MkdirTemp(opts.directory, "ledgerctl-demo-")
		if err != nil {
			return fmt.Errorf("demo: %w", err)
		}
		a.database = filepath.Join(dir, "ledger.db")
	}
	db, _, err := a.createDB(ctx)
	if err != nil {
		return err
	}
	defer db.Close()
	for h, err := range db.Chains(ctx, "") {
		if err != nil {
			return err
		}
		return usageErrorf("demo writes a fresh ledger, and %s already holds chain %q", a.databaseName(), h.Chain)
	}
	d := &demoEnv{DB: db, Out: out, Tenant: demoTenant, Path: displayName(a.databaseName()), checks: registeredChecks()}
	d.Printf("ledger: %s\n", d.Path)
	d.Printf("\nA working day of acme, a wholesaler, recorded through the engine. Every entry is hash-linked\n" +
		"to the one before it in its chain; every request carries an idempotency key, so a retry returns\n" +
		"the original entry (replayed=true) and writes nothing, and a key reused for another request is\n" +
		"refused. Chains are named tenant/domain/…: audit, stock, fin (journal), val (valuation), outbox and inbox.\n")
	for _, step := range registeredDemoSteps() {
		d.Printf("\n== %s\n", step.name)
		if err := step.run(ctx, d); err != nil {
			return fmt.Errorf("demo step %q: %w", step.name, err)
		}
	}
	if err := db.Close(); err != nil {
		return err
	}
	size := d.stats.SizeBytes
	if !isDatabaseURL(a.databaseName()) {
		info, err := os.Stat(a.databaseName())
		if err != nil {
			return fmt.Errorf("demo: %w", err)
		}
		size = info.Size()
	}
	demoSummary(d, size)
	return nil
}

// displayName is a ledger name fit for printing: absolute for files,
// without a password for URLs.
func displayName(name string) string {
	if isDatabaseURL(name) {
		return redactURL(name)
	}
	if abs, err := filepath.Abs(name); err == nil {
		return abs
	}
	return name
}

// The raw-entry steps: an audit chain of the tenant's ERP events, written
// with idempotency keys as a service that retries would.

func init() {
	registerDemoStep(10, "raw entries: the ERP's audit trail", demoAppendRaw)
	registerDemoStep(11, "retries replay the original entries", demoRetryRaw)
	registerDemoStep(12, "a reused key with a different request is a conflict", demoConflictRaw)
	registerDemoStep(13, "a batch retried whole is answered from its entries", demoRetryBatch)
	registerDemoStep(90, "verification", demoVerify)
}

// demoAuditChain is the chain of the raw-entry steps.
func demoAuditChain(d *demoEnv) (string, error) {
	return chain.ScopedName(d.Tenant, "audit", "erp-events")
}

// demoAuditEvents are the requests of the raw-entry steps.
var demoAuditEvents = []struct{ key, payload string }{
	{"period-2026-11-open", `{"event":"period.opened","period":"2026-11"}`},
	{"user-jdoe-login-0001", `{"event":"user.login","user":"jdoe","site":"WH-1"}`},
	{"price-list-2026-11", `{"event":"price_list.published","list":"2026-11","items":412}`},
}

const demoAuditType = "audit.event/v1"

func demoAuditRequest(name string, i int) chain.Request {
	return chain.Request{Chain: name, IdempotencyKey: demoAuditEvents[i].key, Type: demoAuditType,
		Payload: []byte(demoAuditEvents[i].payload)}
}

func demoAppendRaw(ctx context.Context, d *demoEnv) error {
	name, err := demoAuditChain(d)
	if err != nil {
		return err
	}
	for i := range demoAuditEvents {
		res, err := d.DB.Append(ctx, demoAuditRequest(name, i))
		if err != nil {
			return err
		}
		d.Printf("appended %s seq %d key %s hash %.16s…\n", name, res.Entry.Seq, res.Entry.IdempotencyKey, res.Entry.Hash)
	}
	return nil
}

func demoRetryRaw(ctx context.Context, d *demoEnv) error {
	name, err := demoAuditChain(d)
	if err != nil {
		return err
	}
	for i := range demoAuditEvents {
		res, err := d.DB.Append(ctx, demoAuditRequest(name, i))
		if err != nil {
			return err
		}
		if !res.Replayed {
			return fmt.Errorf("retry of key %s appended seq %d instead of replaying", res.Entry.IdempotencyKey, res.Entry.Seq)
		}
		d.Printf("retry of key %s: replayed=true, seq %d hash %.16s… (nothing written)\n",
			res.Entry.IdempotencyKey, res.Entry.Seq, res.Entry.Hash)
		d.Replayed(1)
	}
	return nil
}

// demoImportLines are the lines of an import the ERP sends as one batch,
// then sends again after a timeout.
var demoImportLines = []struct{ key, payload string }{
	{"import-4711-line-1", `{"event":"import.line","import":4711,"line":1,"item":"SKU-1","qty":"12"}`},
	{"import-4711-line-2", `{"event":"import.line","import":4711,"line":2,"item":"SKU-2","qty":"5"}`},
	{"import-4711-line-3", `{"event":"import.line","import":4711,"line":3,"item":"SKU-7","qty":"40"}`},
}

// demoRetryBatch appends an import's lines in one DB.AppendBatch, then
// retries the whole batch: every line comes back replayed, read without
// the writer.
func demoRetryBatch(ctx context.Context, d *demoEnv) error {
	name, err := demoAuditChain(d)
	if err != nil {
		return err
	}
	reqs := make([]chain.Request, len(demoImportLines))
	for i, line := range demoImportLines {
		reqs[i] = chain.Request{Chain: name, IdempotencyKey: line.key, Type: demoAuditType, Payload: []byte(line.payload)}
	}
	first, err := d.DB.AppendBatch(ctx, reqs, nil)
	if err != nil {
		return err
	}
	d.Printf("import 4711: %d lines appended in one transaction, seqs %d to %d\n",
		len(first), first[0].Entry.Seq, first[len(first)-1].Entry.Seq)
	retry, err := d.DB.AppendBatch(ctx, reqs, nil)
	if err != nil {
		return err
	}
	for i, res := range retry {
		if !res.Replayed || res.Entry.Hash != first[i].Entry.Hash {
			return fmt.Errorf("batch retry of key %s appended seq %d instead of replaying", res.Entry.IdempotencyKey, res.Entry.Seq)
		}
		d.Printf("batch retry of key %s: replayed=true, seq %d (read without the writer, nothing written)\n",
			res.Entry.IdempotencyKey, res.Entry.Seq)
	}
	d.Replayed(len(retry))
	return nil
}

func demoConflictRaw(ctx context.Context, d *demoEnv) error {
	name, err := demoAuditChain(d)
	if err != nil {
		return err
	}
	req := demoAuditRequest(name, 0)
	req.Payload = []byte(`{"event":"period.opened","period":"2026-12"}`)
	_, err = d.DB.Append(ctx, req)
	var conflict *chain.ConflictError
	if !errors.As(err, &conflict) {
		return fmt.Errorf("reusing key %s with another payload: want an idempotency conflict, got %v", req.IdempotencyKey, err)
	}
	d.Printf("key %s with a different payload: refused, the key is held by seq %d (exit code %d from ledgerctl append)\n",
		req.IdempotencyKey, conflict.ExistingSeq, exitConflict)
	d.Conflicted()
	return nil
}

func demoVerify(ctx context.Context, d *demoEnv) error {
	report, err := verifyDatabase(ctx, d.DB, chain.VerifyOptions{}, d.checks, true)
	if err != nil {
		return err
	}
	stats, err := d.DB.Stats(ctx)
	if err != nil {
		return err
	}
	if !report.OK() {
		for _, f := range report.Failures {
			d.Printf("FAILURE %s\n", f)
		}
		return fmt.Errorf("%w: %d failure(s)", errVerificationFailed, len(report.Failures))
	}
	d.Printf("verified %s, %s: intact\n", plural(report.Chains, "chain", "chains"), plural(report.Entries, "entry", "entries"))
	d.Printf("  every hash and link, every chain's head, and the state rebuilt from the chains by the %s check%s\n",
		demoCheckNames(d.checks), pluralSuffix(len(d.checks)))
	d.stats = stats
	return nil
}

// demoSummary ends the demo, once the ledger is closed, so that the size it
// gives is the one of the file the demo leaves (sizeBytes).
func demoSummary(d *demoEnv, sizeBytes int64) {
	d.Printf("\nsummary: %s in %s (%d bytes)\n", plural(d.stats.Entries, "entry", "entries"), plural(d.stats.Chains, "chain", "chains"),
		sizeBytes)
	d.Printf("  %s replayed the original entries and wrote nothing\n", plural(int64(d.replays), "retried request", "retried requests"))
	d.Printf("  %s and %s wrote nothing\n", plural(int64(d.conflicts), "idempotency conflict", "idempotency conflicts"),
		plural(int64(d.refusals), "request refused by a rule", "requests refused by a rule"))
	d.Printf("\nthe ledger stays at %s; look around with:\n", d.Path)
	db := demoProgram() + " --db " + shellQuote(d.Path)
	d.Printf("  %s chains\n  %s log acme/audit/erp-events\n  %s stock --tenant %s balance FLOUR-405\n"+
		"  %s fin --tenant %s trial-balance\n  %s verify\n", db, db, db, d.Tenant, db, d.Tenant, db)
}

// demoCheckNames lists the registered checks' names: "fin, stock and val".
func demoCheckNames(checks []registeredCheck) string {
	names := make([]string, len(checks))
	for i, c := range checks {
		names[i] = c.name
	}
	if len(names) < 2 {
		return strings.Join(names, "")
	}
	return strings.Join(names[:len(names)-1], ", ") + " and " + names[len(names)-1]
}

// pluralSuffix is "s" unless n is 1.
func pluralSuffix(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}
