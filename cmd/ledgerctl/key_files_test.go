package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A key file that holds no key of the kind a flag wants (the .pub given to
// sign, the private key given to verify, a damaged file) is invalid input:
// exit 2 INVALID_INPUT naming the flag, never a storage failure, and
// nothing is written.
func TestMalformedKeyFilesAreInvalidInput(t *testing.T) {
	l := newFileLedger(t)
	l.seed()
	key, pub := filepath.Join(l.dir, "erp.key"), filepath.Join(l.dir, "erp.pub")
	l.must("keygen", "ledger.example/erp", "--key", key, "--pub", pub)
	cp := filepath.Join(l.dir, "cp.txt")
	l.must("checkpoint", "--key", key, "--out", cp)
	damaged := filepath.Join(l.dir, "damaged.pub")
	if err := os.WriteFile(damaged, []byte("ledger.example/erp+00000000+not-base64!\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	proof := filepath.Join(l.dir, "proof.json")
	l.must("prove", "entry", "acme/audit/events", "1", "--checkpoint", cp, "--out", proof)
	before := l.snapshot()
	for _, c := range []struct {
		name string
		args []string
		flag string
	}{
		{"checkpoint with the .pub", []string{"checkpoint", "--key", pub}, "--key"},
		{"checkpoint with a damaged key", []string{"checkpoint", "--key", damaged}, "--key"},
		{"verify-proof with the private key", []string{"verify-proof", "--key", key, proof}, "--key"},
		{"verify-proof with a damaged key", []string{"verify-proof", "--key", damaged, proof}, "--key"},
		{"prove with a damaged --pub", []string{"prove", "entry", "acme/audit/events", "1", "--checkpoint", cp, "--pub", damaged}, "--pub"},
		{"prove with the private key as --pub", []string{"prove", "consistency", cp, cp, "--pub", key}, "--pub"},
		{"verify --checkpoint with a damaged key", []string{"verify", "--checkpoint", cp, "--key", damaged}, "--key"},
	} {
		r := l.run(c.args...)
		r.expect(t, exitUsage, c.flag+" ")
		if j := l.run(append([]string{"-o", "json"}, c.args...)...); j.code != exitUsage || !strings.Contains(j.stderr, `"code":"INVALID_INPUT"`) {
			t.Errorf("%s -o json: exit %d, stderr %s", c.name, j.code, j.stderr)
		}
	}
	if after := l.snapshot(); after != before {
		t.Fatal("a refused key file changed the ledger")
	}
	// The right files still work.
	l.must("verify-proof", "--key", pub, proof)
	l.must("verify", "--checkpoint", cp, "--key", pub)
}
