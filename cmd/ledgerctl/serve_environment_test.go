package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/spf13/pflag"
)

// lockedBuffer is a stderr the server writes to while the test reads it.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// runningServe is a serve started in-process with its own environment.
type runningServe struct {
	first  string // the first line on stdout
	lines  chan string
	stderr *lockedBuffer
	code   chan int
	cancel context.CancelFunc
}

// startServeEnv runs serve with args and the environment env, and waits for its
// first line.
func startServeEnv(t *testing.T, env map[string]string, args ...string) *runningServe {
	t.Helper()
	a := &app{environment: func(name string) string { return env[name] }}
	ctx, cancel := context.WithCancel(context.Background())
	out, w := io.Pipe()
	s := &runningServe{lines: make(chan string, 10), stderr: &lockedBuffer{}, code: make(chan int, 1), cancel: cancel}
	go func() {
		s.code <- execute(ctx, a, args, nil, w, s.stderr)
		w.Close()
	}()
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			s.lines <- sc.Text()
		}
		close(s.lines)
	}()
	select {
	case s.first = <-s.lines:
	case <-time.After(30 * time.Second):
		cancel()
		t.Fatalf("serve printed nothing; stderr %s", s.stderr)
	}
	s.waitReady(t)
	return s
}

// waitReady waits until the server answers /readyz, so that a stop is not
// a cancellation of its start.
func (s *runningServe) waitReady(t *testing.T) {
	t.Helper()
	address := strings.TrimPrefix(s.first, "listening on ")
	var line serveLineJSON
	if json.Unmarshal([]byte(s.first), &line) == nil {
		address = line.Address
	}
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		resp, err := http.Get(address + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
	}
	t.Fatalf("%s never ready; stderr %s", address, s.stderr)
}

// stop cancels serve (as SIGTERM does) and returns its exit code and last line.
func (s *runningServe) stop(t *testing.T) (int, string) {
	t.Helper()
	s.cancel()
	var last string
	for line := range s.lines {
		last = line
	}
	select {
	case c := <-s.code:
		return c, last
	case <-time.After(30 * time.Second):
		t.Fatal("serve did not stop")
	}
	return 0, ""
}

// Every serve flag is read from LEDGER_<FLAG> when the command line does not
// set it; the command line wins; -o json makes serve's own lines JSON.
func TestServeEnvironment(t *testing.T) {
	l := newFileLedger(t)
	l.must("init")
	s := startServeEnv(t, map[string]string{"LEDGER_DB": l.name, "LEDGER_ADDR": "127.0.0.1:0", "LEDGER_OUTPUT": "json",
		"LEDGER_RATE_PER_KEY": "5"}, "serve")
	var listening serveLineJSON
	if err := json.Unmarshal([]byte(s.first), &listening); err != nil || listening.Event != "listening" ||
		!strings.HasPrefix(listening.Address, "http://127.0.0.1:") {
		t.Fatalf("first line %q: %v", s.first, err)
	}
	code, last := s.stop(t)
	var stopped serveLineJSON
	if err := json.Unmarshal([]byte(last), &stopped); err != nil || code != exitSuccess || stopped.Event != "stopped" {
		t.Fatalf("exit %d, last line %q: %v", code, last, err)
	}
	// The access log is JSON too, and starts with the build's version.
	first, _, _ := strings.Cut(s.stderr.String(), "\n")
	var logged map[string]any
	if err := json.Unmarshal([]byte(first), &logged); err != nil || logged["msg"] != "ledgerctl serve" || logged["format"] != "v1" {
		t.Fatalf("first log line %q: %v", first, err)
	}

	// A flag wins over its variable: LEDGER_ADDR cannot be listened on.
	s = startServeEnv(t, map[string]string{"LEDGER_ADDR": "256.0.0.1:bad", "LEDGER_OUTPUT": "json"},
		"--db", l.name, "serve", "--addr", "127.0.0.1:0", "-o", "text")
	if !strings.HasPrefix(s.first, "listening on http://127.0.0.1:") {
		t.Fatalf("first line %q", s.first)
	}
	if code, last := s.stop(t); code != exitSuccess || !strings.HasPrefix(last, "stopped: ") {
		t.Fatalf("exit %d, last line %q", code, last)
	}
}

// A value the flag refuses, or one serve refuses after parsing, is exit 2
// naming the variable; nothing listens.
func TestServeEnvironmentRefused(t *testing.T) {
	l := newFileLedger(t)
	l.must("init")
	secret := filepath.Join(l.dir, "db-url")
	if err := os.WriteFile(secret, []byte(l.name+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		env  map[string]string
		want string
	}{
		{map[string]string{"LEDGER_RATE_PER_KEY": "fast"}, `$LEDGER_RATE_PER_KEY "fast"`},
		{map[string]string{"LEDGER_KEEP_ORPHAN_LEASES": "maybe"}, "$LEDGER_KEEP_ORPHAN_LEASES"},
		{map[string]string{"LEDGER_SHUTDOWN_TIMEOUT": "soon"}, "$LEDGER_SHUTDOWN_TIMEOUT"},
		{map[string]string{"LEDGER_BODY_LIMIT": "0"}, "(set by $LEDGER_BODY_LIMIT)"},
		{map[string]string{"LEDGER_OUTPUT": "xml"}, "-o \"xml\""},
		{map[string]string{"LEDGER_DB": l.name, "LEDGER_DB_FILE": secret}, "$LEDGER_DB and $LEDGER_DB_FILE are both set"},
		{map[string]string{"LEDGER_DB_FILE": filepath.Join(l.dir, "missing")}, "$LEDGER_DB_FILE"},
	} {
		a := &app{environment: func(name string) string { return c.env[name] }}
		var stdout, stderr bytes.Buffer
		args := []string{"serve", "--addr", "127.0.0.1:0"}
		if c.env["LEDGER_DB"] == "" && c.env["LEDGER_DB_FILE"] == "" {
			args = append([]string{"--db", l.name}, args...)
		}
		code := execute(context.Background(), a, args, nil, &stdout, &stderr)
		if code != exitUsage || !strings.Contains(stderr.String(), c.want) || stdout.Len() != 0 {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want exit 2 naming %s", c.env, code, stdout.String(), stderr.String(), c.want)
		}
	}
	// The database URL may come from a file (a secret kept out of the
	// environment): serve opens the ledger the file names.
	s := startServeEnv(t, map[string]string{"LEDGER_DB_FILE": secret}, "serve", "--addr", "127.0.0.1:0")
	if code, _ := s.stop(t); code != exitSuccess || !strings.Contains(s.stderr.String(), "--db "+l.name+" apikey create") {
		t.Fatalf("exit %d, stderr %s", code, s.stderr)
	}
}

// The environment is read generically: a flag added to serve has its
// variable and its help line without more code.
func TestServeEnvironmentIsGeneric(t *testing.T) {
	a := &app{environment: func(name string) string {
		return map[string]string{"LEDGER_SOME_NEW_FLAG": "42", "LEDGER_ADDR": "127.0.0.1:9"}[name]
	}}
	root := newRootCommand(a)
	serve, _, err := root.Find([]string{"serve"})
	if err != nil {
		t.Fatal(err)
	}
	var added int
	serve.Flags().IntVar(&added, "some-new-flag", 0, "a flag added later")
	if err := serve.ParseFlags([]string{"--idle-timeout", "1s"}); err != nil {
		t.Fatal(err)
	}
	if err := a.applyEnvironment(serve); err != nil {
		t.Fatal(err)
	}
	if added != 42 || serve.Flags().Lookup("addr").Value.String() != "127.0.0.1:9" {
		t.Fatalf("some-new-flag %d, addr %s", added, serve.Flags().Lookup("addr").Value)
	}
	var help bytes.Buffer
	serve.SetOut(&help)
	serve.HelpFunc()(serve, nil)
	serve.Flags().VisitAll(func(f *pflag.Flag) {
		if f.Name == "help" {
			return
		}
		if !strings.Contains(help.String(), environmentName(f.Name)) {
			t.Errorf("serve --help does not name %s", environmentName(f.Name))
		}
	})
	if !strings.Contains(help.String(), "LEDGER_DB_FILE") || !strings.Contains(help.String(), "LEDGER_SOME_NEW_FLAG") {
		t.Errorf("serve --help:\n%s", help.String())
	}
}

// serve on a ledger without a valid API key says so, with the command that
// creates one; with a key it says nothing of the kind.
func TestServeFirstStartHint(t *testing.T) {
	l := newFileLedger(t)
	l.must("init")
	s := startServeEnv(t, nil, "--db", l.name, "serve", "--addr", "127.0.0.1:0")
	s.stop(t)
	want := "no API key: every request is refused with 401 until one exists; stop the server (it holds the file), then create one with: " +
		"ledgerctl --db " + shellQuote(l.name) + " apikey create --tenant default --scopes read,write,admin"
	if !strings.Contains(s.stderr.String(), want) {
		t.Fatalf("stderr lacks the hint:\n%s", s.stderr)
	}
	l.must("apikey", "create", "--tenant", "default", "--scopes", "read")
	s = startServeEnv(t, nil, "--db", l.name, "serve", "--addr", "127.0.0.1:0")
	s.stop(t)
	if strings.Contains(s.stderr.String(), "no API key") {
		t.Fatalf("hint with a key:\n%s", s.stderr)
	}
}

// Any value of any serve variable either sets its flag or is refused as a
// usage error (exit 2) that names the variable; it never panics.
func FuzzServeEnvironment(f *testing.F) {
	f.Add(uint8(0), "127.0.0.1:0")
	f.Add(uint8(3), "-1")
	f.Add(uint8(7), "1e309")
	f.Add(uint8(11), "true")
	f.Add(uint8(200), "1h\x00")
	f.Fuzz(func(t *testing.T, which uint8, value string) {
		probe := newRootCommand(&app{})
		serve, _, err := probe.Find([]string{"serve"})
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		serve.Flags().VisitAll(func(fl *pflag.Flag) {
			if !environmentSkipped[fl.Name] {
				names = append(names, fl.Name)
			}
		})
		serve.InheritedFlags().VisitAll(func(fl *pflag.Flag) {
			if !environmentSkipped[fl.Name] {
				names = append(names, fl.Name)
			}
		})
		flag := names[int(which)%len(names)]
		variable := environmentName(flag)
		a := &app{environment: func(name string) string {
			if name == variable {
				return value
			}
			return ""
		}}
		root := newRootCommand(a)
		serve, _, _ = root.Find([]string{"serve"})
		if err := serve.ParseFlags(nil); err != nil {
			t.Fatal(err)
		}
		err = a.applyEnvironment(serve)
		switch {
		case err != nil:
			if code, _ := classify(err); code != exitUsage || !strings.Contains(err.Error(), "$"+variable) {
				t.Fatalf("%s=%q: %v (exit %d)", variable, value, err, code)
			}
		case value != "" && !serve.Flags().Lookup(flag).Changed:
			t.Fatalf("%s=%q accepted but --%s not set", variable, value, flag)
		}
	})
}
