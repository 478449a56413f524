package main

import (
	"context"
	"fmt"
	"os"

	"github.com/ledgerworks/ledger/chain"
	"github.com/ledgerworks/ledger/storage/bolt"
)

// The backup step: a copy of the open ledger, taken without closing it, as
// `ledgerctl backup` takes one beside a running server, then verified on
// its own against a head saved before it. It shares order 90 and runs
// between the HTTP step and the verification (steps of one order run by
// name).

func init() {
	registerDemoStep(90, "backup: a consistent copy of the open ledger, verified on its own", demoBackup)
}

func demoBackup(ctx context.Context, d *demoEnv) error {
	backend, ok := d.DB.Backend().(*bolt.Backend)
	if !ok {
		d.Printf("a PostgreSQL ledger is backed up with pg_dump while it serves (docs/OPERATIONS.md)\n")
		return nil
	}
	audit, err := demoAuditChain(d)
	if err != nil {
		return err
	}
	saved, err := d.DB.Head(ctx, audit)
	if err != nil {
		return err
	}
	d.Printf("head saved before the backup: %s:%d:%s\n", audit, saved.Seq, saved.Hash)
	out := d.Path + ".backup"
	tmp, err := backupTemp(out)
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name()) // a no-op once renamed into place
	info, err := backend.Backup(ctx, tmp)
	if err != nil {
		tmp.Close()
		return err
	}
	summary := newBackupSummary(info)
	if err := sealBackup(ctx, tmp, summary); err != nil {
		return err
	}
	if err := placeBackup(tmp.Name(), out); err != nil {
		return err
	}
	d.Printf("backup of %s, %s written to %s while the ledger stayed open, its log folded in\n",
		plural(int64(summary.Chains), "chain", "chains"), plural(int64(summary.Entries), "entry", "entries"), out)
	copyDB, err := chain.Open(out, chain.Options{ReadOnly: true, LockTimeout: -1})
	if err != nil {
		return err
	}
	defer copyDB.Close()
	report, err := verifyDatabase(ctx, copyDB, chain.VerifyOptions{ExpectHeads: []chain.Head{saved}}, d.checks, true)
	if err != nil {
		return err
	}
	if !report.OK() {
		return fmt.Errorf("%w: the backup: %d failure(s)", errVerificationFailed, len(report.Failures))
	}
	d.Printf("the copy verifies on its own: intact, %s, and it holds the saved head\n",
		plural(report.Entries, "entry", "entries"))
	d.Printf("  with a server running: %s --db %s backup --out FILE (through its operator socket)\n",
		demoProgram(), shellQuote(d.Path))
	d.Printf("  to put it back: %s --db %s restore --from %s --replace\n", demoProgram(), shellQuote(d.Path), shellQuote(out))
	return copyDB.Close()
}
