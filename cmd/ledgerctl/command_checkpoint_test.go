package main

import (
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/ledgerworks/ledger/checkpoint"
)

func TestCheckpoint(t *testing.T) {
	t.Parallel()
	for _, l := range testLedgers(t) {
		t.Run(l.backend, func(t *testing.T) {
			p := newProofLedger(t, l)
			pub, _ := os.ReadFile(p.pub)
			signed, _ := os.ReadFile(p.new)
			cp, err := checkpoint.Open(signed, string(pub))
			if err != nil || cp.Origin != "ledger.example/erp" || cp.Size != 4 {
				t.Fatalf("checkpoint %+v %v", cp, err)
			}
			// Printed, and as JSON.
			printed := l.must("checkpoint", "--key", p.key)
			if _, err := checkpoint.Open([]byte(printed), string(pub)); err != nil {
				t.Fatalf("printed checkpoint: %v", err)
			}
			var out checkpointJSON
			if err := json.Unmarshal([]byte(l.must("-o", "json", "checkpoint", "--key", p.key)), &out); err != nil || out.Size != 4 || !strings.HasPrefix(out.Note, "ledger.example/erp\n4\n") {
				t.Fatalf("json %+v %v", out, err)
			}
			l.run("checkpoint").expect(t, exitUsage, "--key")
			l.run("checkpoint", "--key", p.pub).expect(t, exitUsage, "not a signing key")
			l.run("checkpoint", "--key", p.key, "--every", "1s").expect(t, exitUsage, "--out")
			l.run("checkpoint", "--key", p.key, "--every", "1ms", "--out", p.file("x")).expect(t, exitUsage, "below")
		})
	}
}
