package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/ledgerworks/ledger/chain"
	"github.com/ledgerworks/ledger/storage/postgres"
)

func init() { registerCommand(newImportCommand) }

// Limits of import.
const (
	// importBatchEntriesMax is how many entries one import transaction
	// writes at most.
	importBatchEntriesMax = 4096
	// importBatchBytesMax bounds the payload bytes of one import transaction.
	importBatchBytesMax = 32 << 20
	// importHeldEntriesMax and importHeldBytesMax bound the entries the
	// check keeps in memory for the writes; a larger import reads the file
	// once more instead.
	importHeldEntriesMax = 1 << 18
	importHeldBytesMax   = 64 << 20
)

// importOptions are the flags of import.
type importOptions struct {
	file string
}

// importJSON is the shape `import -o json` prints.
type importJSON struct {
	File string `json:"file"`
	// Chains and Entries count the file's chains and entries.
	Chains  int64 `json:"chains"`
	Entries int64 `json:"entries"`
	// Appended entries were written; Present ones the ledger already held.
	Appended int64 `json:"appended"`
	Present  int64 `json:"present"`
	// CreatedChains counts the chains the ledger did not hold before.
	CreatedChains int64 `json:"created_chains"`
	// Rebuilt is the derived-state rebuild of each domain (stock, fin,
	// val) that has chains in the file.
	Rebuilt []rebuildJSON `json:"rebuilt"`
}

func newImportCommand(a *app) *cobra.Command {
	opts := importOptions{}
	cmd := &cobra.Command{
		Use:   "import --file EXPORT.jsonl|-",
		Short: "Append an export's entries to the ledger, keeping their times and hashes",
		Long: "import reads a Format v1 export (a file, or standard input with --file -) and appends its\n" +
			"entries to the ledger unchanged (same times, prev_hash and hash), creating the ledger and\n" +
			"missing chains. Before writing anything\n" +
			"it verifies every line of the file (exit 1 with the failures when it does not verify) and\n" +
			"checks that every entry the file shares with the ledger is identical (exit 2 when one\n" +
			"differs); then it appends the entries the ledger lacks. A refused import writes nothing.\n" +
			"An import that stopped partway can be run again: the entries already written are shared\n" +
			"and identical, so it appends the rest. An export with no entries (what a failed export\n" +
			"leaves in a pipe) is refused, exit 2, and creates nothing.\n\n" +
			"Then it rebuilds the derived state (balances, indexes, layers) of every domain that has\n" +
			"chains in the file (stock, fin, val), as rebuild-state does: an export does not carry it.",
		Args: noArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return runImport(cmd, a, opts)
		},
	}
	cmd.Flags().StringVar(&opts.file, "file", "", "the export to import, or - for standard input (kept in a private temporary file while the import runs)")
	return cmd
}

func runImport(cmd *cobra.Command, a *app, opts importOptions) error {
	if opts.file == "" {
		return usageErrorf("import: --file names the export to import (or - for standard input)")
	}
	path := opts.file
	if path == "-" {
		// The import reads its file more than once (verify, check, write):
		// standard input is kept in a file of mode 0600, removed afterwards.
		// TMPDIR names where; never the ledger's log folder.
		if err := checkOutputPath(a.databaseName(), filepath.Join(os.TempDir(), "ledgerctl-import.jsonl")); err != nil {
			return err
		}
		spooled, remove, err := spoolInput(cmd.InOrStdin())
		if err != nil {
			return err
		}
		defer remove()
		path = spooled
	}
	ctx := cmd.Context()

	// 1. The file proves itself: hashes, links, seqs from 1, contiguous chains.
	report, err := verifyFile(cmd, path, nil)
	if err != nil {
		return err
	}
	if !report.OK() {
		if err := a.print(cmd, newVerifyJSON(&report), func(w io.Writer) error { return writeReportText(w, &report) }); err != nil {
			return err
		}
		return fmt.Errorf("%w: import refused, %s does not verify (%s); nothing written", errVerificationFailed,
			opts.file, plural(int64(len(report.Failures)), "failure", "failures"))
	}
	// An export with no entry is refused: a failed export upstream of a pipe
	// (`export --all | import --file -`) writes nothing, and importing that
	// must not create a ledger and report success.
	if report.Entries == 0 {
		return invalidInputf("import: %s holds no entries; nothing to import, nothing written "+
			"(an export that failed writes nothing: check its exit status, for example with `set -o pipefail`)", opts.file)
	}
	// 2. Every entry is one this ledger accepts, and those it already holds
	// are identical. A missing ledger is created only once that is known.
	db, err := a.openDB(ctx, false)
	missing := errors.Is(err, errLedgerMissing) || errors.Is(err, postgres.ErrSchemaVersion)
	if err != nil && !missing {
		return err
	}
	if db != nil {
		defer db.Close()
	}
	plan := newImportPlan()
	if err := planImport(ctx, db, path, plan); err != nil {
		return err
	}
	if missing {
		if db, _, err = a.createDB(ctx); err != nil {
			return err
		}
		defer db.Close()
	}
	// 3. Append the rest.
	bar := newProgress(cmd, "importing", plan.out.Entries-plan.out.Present)
	defer bar.finish()
	appended, err := writeImport(ctx, db, path, plan, bar.set)
	plan.out.Appended = appended
	if err != nil {
		return fmt.Errorf("import %s stopped after appending %d entries (run it again to append the rest): %w", opts.file, appended, err)
	}
	// 4. Rebuild the derived state of the file's domains, even when nothing
	// was appended: an earlier run may have stopped before this step.
	rebuilt, err := rebuildDomains(ctx, db, func(domain string) bool { return plan.domains[domain] })
	if err != nil {
		return fmt.Errorf("import %s appended %d entries, then stopped (run `ledgerctl rebuild-state`): %w", opts.file, appended, err)
	}
	if err := db.Close(); err != nil {
		return err
	}
	out := plan.out
	out.File = opts.file
	out.Rebuilt = rebuilt.Domains
	err = a.print(cmd, out, func(w io.Writer) error {
		_, err := fmt.Fprintf(w, "imported %s: %s (%d new), %s: %d appended, %d already present\n", opts.file,
			plural(out.Chains, "chain", "chains"), out.CreatedChains, plural(out.Entries, "entry", "entries"), out.Appended, out.Present)
		if err != nil {
			return err
		}
		return writeRebuildText(w, out.Rebuilt)
	})
	if err != nil {
		return err
	}
	return rebuildFailed(rebuilt)
}

// spoolInput copies r into a new temporary file (mode 0600, as os.CreateTemp
// makes it) and returns its name and a function that removes it.
func spoolInput(r io.Reader) (name string, remove func(), err error) {
	f, err := os.CreateTemp("", "ledgerctl-import-*.jsonl")
	if err != nil {
		return "", nil, fmt.Errorf("import: keeping standard input: %w", err)
	}
	remove = func() { os.Remove(f.Name()) }
	_, err = io.Copy(f, r)
	if closeErr := f.Close(); err == nil {
		err = closeErr
	}
	if err != nil {
		remove()
		return "", nil, fmt.Errorf("import: keeping standard input: %w", err)
	}
	return f.Name(), remove, nil
}

// forEachExportLine calls fn with every entry of the export file in order.
func forEachExportLine(ctx context.Context, name string, fn func(e *chain.Entry) error) error {
	f, err := os.Open(name)
	if err != nil {
		return invalidInputf("%v", err)
	}
	defer f.Close()
	r := chain.NewExportReader(f)
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		e, err := r.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		if err := fn(&e); err != nil {
			return err
		}
	}
}

// importPlan is what the check of the file against the ledger found.
type importPlan struct {
	// heads are the ledger's heads of the file's chains: the file's entries
	// up to each are present, the ones after are to be appended.
	heads map[string]uint64
	out   importJSON
	// domains are the domains with derived state (stock, fin, val) that
	// the file has chains of.
	domains map[string]bool
	// pending holds the entries to append, in file order, unless there are
	// more than fit the bounds (overflow): then the file is read again.
	pending      []chain.Entry
	pendingBytes int
	overflow     bool
	// heldEntriesMax and heldBytesMax bound pending.
	heldEntriesMax, heldBytesMax int
}

func newImportPlan() *importPlan {
	return &importPlan{heads: map[string]uint64{}, domains: map[string]bool{}, heldEntriesMax: importHeldEntriesMax, heldBytesMax: importHeldBytesMax}
}

// hold keeps an entry to append, within the memory bounds.
func (p *importPlan) hold(e *chain.Entry) {
	if p.overflow {
		return
	}
	p.pendingBytes += len(e.Payload) + len(e.IdempotencyKey) + len(e.Type)
	if len(p.pending) == p.heldEntriesMax || p.pendingBytes > p.heldBytesMax {
		p.pending, p.overflow = nil, true
		return
	}
	p.pending = append(p.pending, *e)
}

// planImport checks what verifying the file does not: that each entry fits
// this ledger's limits, that times never decrease within a chain, that no
// chain holds one idempotency key twice, and that every entry at a seq the
// ledger already holds is identical to the ledger's (db is nil for a ledger
// that does not exist yet). With a verified file this means every append of
// the import will be accepted.
func planImport(ctx context.Context, db *chain.DB, name string, plan *importPlan) error {
	refuse := func(e *chain.Entry, format string, args ...any) error {
		return invalidInputf("import refused, nothing written: %s: chain %q seq %d: %s", name, e.Chain, e.Seq, fmt.Sprintf(format, args...))
	}
	var current string
	var lastTime int64
	keys := map[string]uint64{}
	return forEachExportLine(ctx, name, func(e *chain.Entry) error {
		if e.Chain != current { // a verified file's chains are contiguous
			current, lastTime = e.Chain, e.TimeUnixNano
			clear(keys)
		}
		req := chain.Request{Chain: e.Chain, IdempotencyKey: e.IdempotencyKey, Type: e.Type, Payload: e.Payload}
		if err := chain.ValidateStoredRequest(req, 0); err != nil {
			return fmt.Errorf("import refused, nothing written: %s: chain %q seq %d: %w", name, e.Chain, e.Seq, err)
		}
		if e.TimeUnixNano < lastTime {
			return refuse(e, "time %d is before the previous entry's %d", e.TimeUnixNano, lastTime)
		}
		lastTime = e.TimeUnixNano
		if e.IdempotencyKey != "" {
			if seq, ok := keys[e.IdempotencyKey]; ok {
				return refuse(e, "idempotency key %q is already held by seq %d", e.IdempotencyKey, seq)
			}
			keys[e.IdempotencyKey] = e.Seq
		}
		head, seen := plan.heads[e.Chain]
		if !seen {
			if db != nil {
				h, err := db.Head(ctx, e.Chain)
				if err != nil && !isNotFound(err) {
					return err
				}
				head = h.Seq
			}
			plan.heads[e.Chain] = head
			plan.out.Chains++
			if parts := chain.SplitScopedName(e.Chain); len(parts) > 1 {
				plan.domains[parts[1]] = true // only the names of stateRebuilders select anything
			}
			if head == 0 {
				plan.out.CreatedChains++
			}
		}
		plan.out.Entries++
		if e.Seq > head {
			plan.hold(e)
			return nil
		}
		stored, err := db.Get(ctx, e.Chain, e.Seq)
		if err != nil {
			return err
		}
		if !sameEntry(&stored, e) {
			return refuse(e, "differs from the ledger's entry (ledger hash %s, file hash %s)", stored.Hash, e.Hash)
		}
		plan.out.Present++
		return nil
	})
}

// sameEntry compares every field of two entries.
func sameEntry(a, b *chain.Entry) bool {
	return a.Chain == b.Chain && a.Seq == b.Seq && a.PrevHash == b.PrevHash && a.TimeUnixNano == b.TimeUnixNano &&
		a.IdempotencyKey == b.IdempotencyKey && a.Type == b.Type && string(a.Payload) == string(b.Payload) && a.Hash == b.Hash
}

// writeImport appends the file's entries past each chain's head, in
// transactions of bounded size, and returns how many it appended. It takes
// them from the plan, or reads the file again when they did not fit.
func writeImport(ctx context.Context, db *chain.DB, name string, plan *importPlan, progress func(int64)) (int64, error) {
	var appended int64
	var batch []chain.Entry
	var batchBytes int
	flush := func() error {
		if len(batch) == 0 {
			return nil
		}
		// The function may run more than once: it only reads batch.
		err := db.Update(ctx, func(tx *chain.Tx) error {
			for i := range batch {
				if err := tx.AppendEntry(batch[i]); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			return err
		}
		appended += int64(len(batch))
		progress(appended)
		batch, batchBytes = batch[:0], 0
		return nil
	}
	add := func(e *chain.Entry) error {
		if len(batch) == importBatchEntriesMax || batchBytes+len(e.Payload) > importBatchBytesMax {
			if err := flush(); err != nil {
				return err
			}
		}
		batch = append(batch, *e)
		batchBytes += len(e.Payload)
		return nil
	}
	var err error
	if plan.overflow {
		err = forEachExportLine(ctx, name, func(e *chain.Entry) error {
			if e.Seq <= plan.heads[e.Chain] {
				return nil
			}
			return add(e)
		})
	} else {
		for i := range plan.pending {
			if err = add(&plan.pending[i]); err != nil {
				break
			}
		}
	}
	if err != nil {
		return appended, err
	}
	return appended, flush()
}
