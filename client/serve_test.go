package client_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/ledgerworks/ledger/internal/testbin"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ledgerworks/ledger/client"
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
	t      testing.TB
	cmd    *exec.Cmd
	URL    string // http://127.0.0.1:PORT
	Addr   string
	done   chan struct{}
	mu     sync.Mutex
	output bytes.Buffer // its stdout after the first line, and its stderr
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
	args := append([]string{"--db", db, "serve", "--addr", addr}, extra...)
	bin := testbin.Built()
	if bin == "" {
		return nil, errors.New("ledgerctl is not built: call serve on the test's goroutine first")
	}
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), "LEDGER_DB=")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	s := &served{t: t, cmd: cmd, done: make(chan struct{})}
	cmd.Stderr = (*lockedWriter)(s)
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	first := make(chan string, 1)
	go func() {
		r := bufio.NewReader(stdout)
		line, _ := r.ReadString('\n')
		first <- line
		io.Copy((*lockedWriter)(s), r)
		cmd.Wait()
		close(s.done)
	}()
	t.Cleanup(func() { s.Kill() })
	select {
	case line := <-first:
		url, ok := strings.CutPrefix(strings.TrimSpace(line), "listening on ")
		if !ok || !strings.HasPrefix(url, "http://") {
			s.Kill()
			return nil, fmt.Errorf("ledgerctl serve printed %q first, want \"listening on http://ADDR\"\n%s", line, s.Output())
		}
		s.URL, s.Addr = url, strings.TrimPrefix(url, "http://")
	case <-time.After(30 * time.Second):
		s.Kill()
		return nil, fmt.Errorf("ledgerctl serve did not start within 30 s\n%s", s.Output())
	}
	return s, nil
}

type lockedWriter served

func (w *lockedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.output.Write(p)
}

// Output returns what the server wrote after its first line.
func (s *served) Output() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.output.String()
}

// Kill ends the server with SIGKILL: no shutdown, no flush, no close.
func (s *served) Kill() {
	if s.cmd.Process != nil {
		_ = s.cmd.Process.Signal(syscall.SIGKILL)
		<-s.done
	}
}

// Stop ends the server with SIGTERM and waits for its graceful shutdown.
func (s *served) Stop() {
	s.t.Helper()
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.done:
	case <-time.After(30 * time.Second):
		s.Kill()
		s.t.Fatalf("ledgerctl serve did not stop within 30 s of SIGTERM\n%s", s.Output())
	}
	if code := s.cmd.ProcessState.ExitCode(); code != 0 {
		s.t.Fatalf("ledgerctl serve exited %d after SIGTERM\n%s", code, s.Output())
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
