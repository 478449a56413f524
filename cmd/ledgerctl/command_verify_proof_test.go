package main

import (
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/ledgerworks/ledger/audit"
)

func TestVerifyProof(t *testing.T) {
	t.Parallel()
	l := newFileLedger(t)
	p := newProofLedger(t, l)
	entry, consistency := p.file("e.json"), p.file("c.json")
	l.must("prove", "entry", "acme/audit/events", "6", "--checkpoint", p.new, "--out", entry)
	l.must("prove", "consistency", p.old, p.new, "--out", consistency)
	if out := l.must("verify-proof", "--key", p.pub, entry); !strings.HasPrefix(out, "proof holds: acme/audit/events seq 6 ") {
		t.Fatalf("entry: %q", out)
	}
	var v verifyProofJSON
	if err := json.Unmarshal([]byte(l.must("-o", "json", "verify-proof", "--key", p.pub, consistency)), &v); err != nil || !v.OK || v.Old.Size != 3 || v.Checkpoint.Size != 4 {
		t.Fatalf("consistency: %+v %v", v, err)
	}
	// Tampered: an entry's payload, a path's hash; another key; not a proof.
	b, _ := os.ReadFile(entry)
	proof, _ := audit.ParseEntryProof(b)
	proof.Entry.Payload = "c2l4IQ=="
	write := func(name string, p interface{ Marshal() ([]byte, error) }) string {
		b, err := p.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(name, b, 0o644); err != nil {
			t.Fatal(err)
		}
		return name
	}
	l.run("verify-proof", "--key", p.pub, write(p.file("bad1.json"), proof)).expect(t, exitVerification, "entry hash mismatch")
	b, _ = os.ReadFile(consistency)
	cons, _ := audit.ParseConsistencyProof(b)
	cons.Chains[0].Consistency[0][0] ^= 1
	l.run("-o", "json", "verify-proof", "--key", p.pub, write(p.file("bad2.json"), cons)).expect(t, exitVerification, "PROOF_REFUSED")
	other := p.file("other")
	l.must("keygen", "ledger.example/erp", "--key", other+".key", "--pub", other+".pub")
	l.run("verify-proof", "--key", other+".pub", entry).expect(t, exitVerification, "signature")
	os.WriteFile(p.file("junk.json"), []byte(`{"format":"x"}`), 0o644)
	l.run("verify-proof", "--key", p.pub, p.file("junk.json")).expect(t, exitUsage, "format")
	l.run("verify-proof", entry).expect(t, exitUsage, "--key")
}

// TestVerifyCheckpoint checks that verify --checkpoint catches a
// truncation that the stored heads and trees no longer show.
func TestVerifyCheckpoint(t *testing.T) {
	t.Parallel()
	l := newFileLedger(t)
	p := newProofLedger(t, l)
	if out := l.must("verify", "--checkpoint", p.new, "--key", p.pub); !strings.HasPrefix(out, "intact:") {
		t.Fatalf("verify: %q", out)
	}
	l.must("verify", "--trees")
	db := l.open()
	previous, err := db.Get(t.Context(), "acme/audit/events", 5)
	db.Close()
	if err != nil {
		t.Fatal(err)
	}
	truncateChain(t, l.name, "acme/audit/events", previous.Head())
	l.must("verify")
	l.must("verify", "--checkpoint", p.old, "--key", p.pub) // the old checkpoint still holds
	r := l.run("-o", "json", "verify", "--checkpoint", p.new, "--key", p.pub)
	r.expect(t, exitVerification, "VERIFICATION_FAILED")
	var report verifyJSON
	if err := json.Unmarshal([]byte(r.stdout), &report); err != nil {
		t.Fatal(err)
	}
	if len(report.Failures) != 1 || report.Failures[0].Reason != "truncated" || report.Failures[0].Seq != 6 {
		t.Fatalf("report %+v", report)
	}
	l.run("verify", "--checkpoint", p.new).expect(t, exitUsage, "--key")
	l.run("verify", "--key", p.pub).expect(t, exitUsage, "--checkpoint")
}
