package apikey_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ledgerworks/ledger/apikey"
	"github.com/ledgerworks/ledger/chain"
)

// The child process of the crash test: the test binary, started again with
// crashChildEnv naming a ledger file, creates keys (and revokes every third
// one) until it is killed, printing each step once it returned.
const crashChildEnv = "APIKEY_TEST_CRASH_LEDGER"

func crashChild(path string) int {
	db, err := chain.Open(path, chain.Options{})
	if err != nil {
		fmt.Fprintln(os.Stderr, "child:", err)
		return 1
	}
	ctx := context.Background()
	out := bufio.NewWriter(os.Stdout)
	for i := 0; ; i++ {
		key, token, err := apikey.Create(ctx, db, apikey.CreateRequest{Tenant: "acme", Name: fmt.Sprint(i), Scopes: readScope()})
		if err != nil {
			fmt.Fprintln(os.Stderr, "child: create:", err)
			return 1
		}
		fmt.Fprintln(out, "created", key.ID, token)
		if i%3 == 0 {
			fmt.Fprintln(out, "revoking", key.ID)
			out.Flush()
			if _, err := apikey.Revoke(ctx, db, key.ID, "crash test"); err != nil {
				fmt.Fprintln(os.Stderr, "child: revoke:", err)
				return 1
			}
			fmt.Fprintln(out, "revoked", key.ID)
		}
		out.Flush()
	}
}

// A process killed (SIGKILL) while it creates and revokes keys leaves a
// ledger that verifies, whose state equals its chain, where every key it
// reported created authenticates unless its revocation was reported begun,
// and every key it reported revoked is refused.
func TestKilledWhileCreatingAndRevoking(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ledger.db")
	if db, err := chain.Open(path, chain.Options{}); err != nil {
		t.Fatal(err)
	} else {
		db.Close()
	}
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), crashChildEnv+"="+path)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	tokens := map[string]string{} // id -> token, of keys reported created
	revoking, revoked := map[string]bool{}, map[string]bool{}
	lines := bufio.NewScanner(stdout)
	for n := 0; n < 60 && lines.Scan(); n++ {
		f := strings.Fields(lines.Text())
		switch f[0] {
		case "created":
			tokens[f[1]] = f[2]
		case "revoking":
			revoking[f[1]] = true
		case "revoked":
			revoked[f[1]] = true
		}
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()
	if len(tokens) < 10 {
		t.Fatalf("the child reported %d keys before it was killed", len(tokens))
	}

	db, err := chain.Open(path, chain.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ctx := context.Background()
	report, err := db.Verify(ctx, chain.VerifyOptions{})
	if err != nil || !report.OK() {
		t.Fatalf("verify after the kill: %v %v", report.Failures, err)
	}
	if failures, err := apikey.Check(ctx, db); err != nil || len(failures) > 0 {
		t.Fatalf("check after the kill: %v %v", failures, err)
	}
	auth, err := apikey.NewAuthenticator(db, apikey.AuthOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer auth.Close()
	for id, token := range tokens {
		_, err := auth.Authenticate(ctx, token)
		switch {
		case revoked[id]:
			if !errors.Is(err, apikey.ErrUnauthenticated) {
				t.Errorf("key %s reported revoked: %v", id, err)
			}
		case revoking[id]: // killed mid-revocation: either answer
		case err != nil:
			t.Errorf("key %s reported created: %v", id, err)
		}
	}
}
