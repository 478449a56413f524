package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestKeygen(t *testing.T) {
	t.Parallel()
	l := newFileLedger(t)
	key, pub := filepath.Join(l.dir, "k"), filepath.Join(l.dir, "k.pub")
	out := l.must("keygen", "ledger.example/erp", "--key", key, "--pub", pub)
	b, err := os.ReadFile(pub)
	if err != nil || !strings.Contains(out, strings.TrimSpace(string(b))) || !strings.HasPrefix(string(b), "ledger.example/erp+") {
		t.Fatalf("pub %q %v, output %q", b, err, out)
	}
	info, err := os.Stat(key)
	if err != nil || info.Mode().Perm() != 0o600 {
		t.Fatalf("key file %v %v", info, err)
	}
	secret, _ := os.ReadFile(key)
	if !strings.HasPrefix(string(secret), "PRIVATE+KEY+ledger.example/erp+") {
		t.Fatalf("key %q", secret)
	}
	// It never overwrites, and refuses an origin no checkpoint can carry.
	l.run("keygen", "ledger.example/erp", "--key", key, "--pub", pub+"2").expect(t, exitUsage, "exists")
	if again, _ := os.ReadFile(key); string(again) != string(secret) {
		t.Fatal("key overwritten")
	}
	l.run("keygen", "two words", "--key", key+"3", "--pub", pub+"3").expect(t, exitUsage, "origin")
}
