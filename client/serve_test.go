package client_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/ledgerworks/ledger/client"
	"github.com/ledgerworks/ledger/internal/testbin"
)

func TestMain(m *testing.M) {
	code := m.Run()
	testbin.Remove()
	os.Exit(code)
}

// runCLI runs ledgerctl once and returns its exit code, stdout and stderr.
func runCLI(t testing.TB, args ...string) (int, string, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, testbin.Ledgerctl(t), args...)
	cmd.Env = append(os.Environ(), "LEDGER_DB=")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit):
		return exit.ExitCode(), stdout.String(), stderr.String()
	case err != nil:
		t.Fatalf("ledgerctl %v: %v", args, err)
	}
	return 0, stdout.String(), stderr.String()
}

// createKey makes an API key with ledgerctl apikey create on a ledger no
// server holds, and returns its token.
func createKey(t testing.TB, db, tenant, scopes string) string {
	t.Helper()
	code, out, errOut := runCLI(t, "--db", db, "apikey", "create", "--tenant", tenant, "--name", "client tests",
		"--scopes", scopes, "-o", "json")
	if code != 0 {
		t.Fatalf("apikey create: exit %d\n%s%s", code, out, errOut)
	}
	var created struct {
		ID    string `json:"id"`
		Token string `json:"token"`
	}
	if err := json.Unmarshal([]byte(out), &created); err != nil || created.Token == "" {
		t.Fatalf("apikey create printed %q: %v", out, err)
	}
	return created.Token
}

// served is a `ledgerctl serve` child process.
type served struct {
	*testbin.Served
	t testing.TB
}

// serve starts ledgerctl serve on db at addr (127.0.0.1:0 for any port)
// and waits for its first line, "listening on http://ADDR".
func serve(t testing.TB, db, addr string, extra ...string) *served {
	t.Helper()
	testbin.Ledgerctl(t) // built here, on the test's goroutine
	s, err := startServe(t, db, addr, extra...)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// startServe is serve for goroutines other than the test's, once serve
// has built the binary: it returns its failure instead of ending the test.
func startServe(t testing.TB, db, addr string, extra ...string) (*served, error) {
	s, err := testbin.StartServe(nil, 30*time.Second, append([]string{"--db", db, "serve", "--addr", addr}, extra...)...)
	if err != nil {
		return nil, err
	}
	t.Cleanup(s.Kill)
	return &served{Served: s, t: t}, nil
}

// Stop ends the server with SIGTERM and waits for its graceful shutdown.
func (s *served) Stop() {
	s.t.Helper()
	if err := s.Served.Stop(30 * time.Second); err != nil {
		s.t.Fatal(err)
	}
}

// newClient is a client of s with token and patient retries.
func newClient(t testing.TB, url, token string, opts client.Options) *client.Client {
	t.Helper()
	opts.BaseURL, opts.Token = url, token
	c, err := client.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.CloseIdleConnections)
	return c
}
