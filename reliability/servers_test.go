package reliability

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/ledgerworks/ledger/internal/testbin"
	"github.com/ledgerworks/ledger/storage/postgres/pgtest"
)

// pgLedger is a PostgreSQL ledger on a schema of its own, initialized,
// with an API key of tenant acme: what several `ledgerctl serve` share.
type pgLedger struct {
	url   string // with the schema as search_path
	token string
}

// newPGLedger creates the schema (dropped at cleanup), runs `ledgerctl
// init` and `ledgerctl apikey create` on it.
func newPGLedger(t *testing.T) *pgLedger {
	t.Helper()
	base := pgtest.URL(t)
	schema := pgtest.NewSchema(t, base)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgtest.Connect(ctx, base)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "CREATE SCHEMA "+pgx.Identifier{schema}.Sanitize()); err != nil {
		t.Fatal(err)
	}
	separator := "?"
	if strings.Contains(base, "?") {
		separator = "&"
	}
	l := &pgLedger{url: base + separator + "search_path=" + schema}
	if r := runLedgerctl(t, nil, "--db", l.url, "init"); r.exitCode != 0 {
		t.Fatalf("init: exit %d\n%s", r.exitCode, r.stderr)
	}
	r := runLedgerctl(t, nil, "--db", l.url, "apikey", "create", "--tenant", "acme", "--name", "servers",
		"--scopes", "read,write,admin", "-o", "json")
	var created struct {
		Token string `json:"token"`
	}
	if r.exitCode != 0 || json.Unmarshal([]byte(r.stdout), &created) != nil || created.Token == "" {
		t.Fatalf("apikey create: exit %d\n%s%s", r.exitCode, r.stdout, r.stderr)
	}
	l.token = created.Token
	return l
}

// conn opens a connection to the ledger's schema, closed at cleanup.
func (l *pgLedger) conn(t *testing.T) *pgx.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgtest.Connect(ctx, l.url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}

// served is a `ledgerctl serve` child process.
type served struct {
	cmd    *exec.Cmd
	url    string // http://127.0.0.1:PORT
	done   chan struct{}
	mu     sync.Mutex
	output bytes.Buffer // its stdout after the first line, and its stderr
}

// startServer starts `ledgerctl --db url serve` on a free port with extra
// flags and waits for its first line, "listening on http://ADDR". It is
// safe from any goroutine once testbin.Ledgerctl has built the binary.
func startServer(url string, extra ...string) (*served, error) {
	bin := testbin.Built()
	if bin == "" {
		return nil, errors.New("ledgerctl is not built")
	}
	cmd := exec.Command(bin, append([]string{"--db", url, "serve", "--addr", "127.0.0.1:0"}, extra...)...)
	cmd.Env = append(os.Environ(), "LEDGER_DB=")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	s := &served{cmd: cmd, done: make(chan struct{})}
	cmd.Stderr = (*serverOutput)(s)
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	first := make(chan string, 1)
	go func() {
		r := bufio.NewReader(stdout)
		line, _ := r.ReadString('\n')
		first <- line
		_, _ = io.Copy((*serverOutput)(s), r)
		_ = cmd.Wait()
		close(s.done)
	}()
	select {
	case line := <-first:
		url, ok := strings.CutPrefix(strings.TrimSpace(line), "listening on ")
		if !ok || !strings.HasPrefix(url, "http://") {
			s.kill()
			return nil, fmt.Errorf("ledgerctl serve printed %q first\n%s", line, s.out())
		}
		s.url = url
	case <-time.After(60 * time.Second):
		s.kill()
		return nil, fmt.Errorf("ledgerctl serve did not start within 60 s\n%s", s.out())
	}
	return s, nil
}

// mustStartServer is startServer on the test's goroutine; the server is
// killed at cleanup.
func mustStartServer(t *testing.T, url string, extra ...string) *served {
	t.Helper()
	testbin.Ledgerctl(t)
	s, err := startServer(url, extra...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.kill)
	return s
}

type serverOutput served

func (w *serverOutput) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.output.Write(p)
}

// out returns what the server wrote after its first line.
func (s *served) out() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.output.String()
}

// kill ends the server with SIGKILL (no shutdown, no release of anything)
// and waits for it.
func (s *served) kill() {
	_ = s.cmd.Process.Signal(syscall.SIGKILL)
	<-s.done
}
