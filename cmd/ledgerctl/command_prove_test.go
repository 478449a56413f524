package main

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/ledgerworks/ledger/audit"
)

func TestProve(t *testing.T) {
	t.Parallel()
	for _, l := range testLedgers(t) {
		t.Run(l.backend, func(t *testing.T) {
			p := newProofLedger(t, l)
			out := l.must("prove", "entry", "acme/audit/events", "3", "--checkpoint", p.old, "--pub", p.pub)
			proof, err := audit.ParseEntryProof([]byte(out))
			if err != nil || proof.Entry.Seq != 3 || proof.ChainSize != 5 {
				t.Fatalf("entry proof %+v %v", proof, err)
			}
			l.must("prove", "consistency", p.old, p.new, "--out", p.file("c.json"))
			l.must("prove", "entry", "acme/a-new", "1", "--checkpoint", p.new, "--out", p.file("e.json"))
			// An entry after the checkpoint, a chain it does not hold, the
			// checkpoints swapped, a checkpoint of another key.
			l.run("prove", "entry", "acme/audit/events", "6", "--checkpoint", p.old).expect(t, exitNotFound, "holds 5 entries")
			l.run("prove", "entry", "acme/a-new", "1", "--checkpoint", p.old).expect(t, exitNotFound, "not in the checkpoint")
			l.run("prove", "consistency", p.new, p.old).expect(t, exitVerification, "not in the new checkpoint")
			l.run("prove", "entry", "acme/audit/events", "0", "--checkpoint", p.old).expect(t, exitUsage, "SEQ")
			l.run("prove", "entry", "acme/audit/events", "1").expect(t, exitUsage, "--checkpoint")
			other := p.file("other")
			l.must("keygen", "ledger.example/erp", "--key", other+".key", "--pub", other+".pub")
			l.run("prove", "entry", "acme/audit/events", "1", "--checkpoint", p.old, "--pub", other+".pub").expect(t, exitVerification, "signature")
		})
	}
}

// The summary of a written proof counts its chains in words: "1 chain".
func TestProveConsistencyOfOneChainSaysChain(t *testing.T) {
	l := newFileLedger(t)
	l.must("init")
	l.must("append", "acme/only", "--type", "t/v1", "--key", "k1", "--data", "a")
	key, pub := filepath.Join(l.dir, "erp.key"), filepath.Join(l.dir, "erp.pub")
	l.must("keygen", "ledger.example/erp", "--key", key, "--pub", pub)
	old, newer := filepath.Join(l.dir, "old.txt"), filepath.Join(l.dir, "new.txt")
	l.must("checkpoint", "--key", key, "--out", old)
	l.must("append", "acme/only", "--type", "t/v1", "--key", "k2", "--data", "b")
	l.must("checkpoint", "--key", key, "--out", newer)
	out := l.must("prove", "consistency", old, newer, "--out", filepath.Join(l.dir, "c.json"))
	if !strings.HasPrefix(out, "consistency proof of 1 chain written to ") {
		t.Fatalf("prove consistency: %q", out)
	}
}
