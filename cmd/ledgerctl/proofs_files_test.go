package main

import (
	"path/filepath"
	"testing"
)

// proofLedger is a seeded ledger with a key pair and two checkpoints: old
// after seed, new after two more entries and a new chain.
type proofLedger struct {
	*testLedger
	key, pub, old, new string
}

func newProofLedger(t *testing.T, l *testLedger) *proofLedger {
	t.Helper()
	l.seed()
	p := &proofLedger{testLedger: l, key: filepath.Join(l.dir, "cp.key"), pub: filepath.Join(l.dir, "cp.pub"),
		old: filepath.Join(l.dir, "old.note"), new: filepath.Join(l.dir, "new.note")}
	l.must("keygen", "ledger.example/erp", "--key", p.key, "--pub", p.pub)
	l.must("checkpoint", "--key", p.key, "--out", p.old)
	l.must("append", "acme/audit/events", "--type", "audit.event/v1", "--data", "six")
	l.must("append", "acme/a-new", "--type", "audit.event/v1", "--data", "first")
	l.must("checkpoint", "--key", p.key, "--out", p.new)
	return p
}

func (p *proofLedger) file(name string) string { return filepath.Join(p.dir, name) }
