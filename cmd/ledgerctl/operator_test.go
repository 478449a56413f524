package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ledgerworks/ledger/internal/testbin"
)

// serveChild is a `ledgerctl serve` child process on 127.0.0.1.
type serveChild struct {
	*testbin.Served
	t    *testing.T
	base string // http://127.0.0.1:PORT
}

// startServe starts `ledgerctl --db db serve` and waits for its address.
func startServe(t *testing.T, db string, extra ...string) *serveChild {
	t.Helper()
	s := &serveChild{t: t, Served: testbin.Serve(t, newProcess(t).env, 30*time.Second,
		append([]string{"--db", db, "serve", "--addr", "127.0.0.1:0"}, extra...)...)}
	s.base = s.URL
	// Ready once its workers have started: a SIGTERM before that ends the
	// start, not the serving.
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		resp, err := http.Get(s.base + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("serve not ready: %v; stderr %s", err, s.Output())
		}
	}
	return s
}

// stop sends SIGTERM and waits for a clean exit.
func (s *serveChild) stop() {
	s.t.Helper()
	if err := s.Stop(30 * time.Second); err != nil {
		s.t.Fatal(err)
	}
}

// runCLI runs one command line in-process with the real clock, as a user's
// shell would (no LEDGER_* variables).
func runCLI(args ...string) cliResult {
	var stdout, stderr bytes.Buffer
	code := execute(context.Background(), &app{environment: func(string) string { return "" }}, args, strings.NewReader(""), &stdout, &stderr)
	return cliResult{stdout: stdout.String(), stderr: stderr.String(), code: code}
}

// operatorDemoLedger makes the demo's ledger (every domain, keys, outbox,
// idempotency records) at dir/ledger.db.
func operatorDemoLedger(t *testing.T) string {
	t.Helper()
	db := filepath.Join(t.TempDir(), "ledger.db")
	if r := runCLI("--db", db, "demo"); r.code != exitSuccess {
		t.Fatalf("demo: exit %d: %s", r.code, r.stderr)
	}
	return db
}

// TestOperatorCommandsBesideServe runs the read-only operator commands
// while a `ledgerctl serve` child holds the file: each goes through the
// operator socket and prints exactly what it prints on the file once the
// server has stopped (text and JSON, errors and exit codes, verify's exit
// 1 on a broken chain included), while the file itself stays locked.
func TestOperatorCommandsBesideServe(t *testing.T) {
	db := operatorDemoLedger(t)
	flipPayloadByte(t, db, "acme/audit/erp-events", 2)
	head := strings.TrimSpace(runCLI("--db", db, "head", "acme/payments").stdout)
	server := startServe(t, db)
	info, err := os.Stat(db + operatorSocketSuffix)
	if err != nil || info.Mode().Type() != os.ModeSocket || info.Mode().Perm() != operatorSocketMode {
		t.Fatalf("operator socket: %v, %v; want a socket of mode %v", info, err, operatorSocketMode)
	}
	commands := [][]string{
		{"verify"}, {"-o", "json", "verify"}, {"verify", "acme/payments", "--expect-head", head},
		{"verify", "acme/payments", "--expect-head", "acme/payments:9:" + strings.Repeat("0", 64)},
		{"chains"}, {"-o", "json", "chains"}, {"stats"}, {"head", "acme/payments"},
		{"get", "acme/payments", "1"}, {"get", "acme/payments", "99"}, {"-o", "json", "get", "acme/payments", "99"},
		{"log", "acme/audit/erp-events"}, {"export", "acme/payments"},
		{"apikey", "list"}, {"-o", "json", "apikey", "list"},
		{"outbox", "dead", "--tenant", "acme"}, {"outbox", "list", "--tenant", "acme"}, {"-o", "json", "outbox", "stats", "--tenant", "acme"},
		{"idempotency", "list"}, {"-o", "json", "idempotency", "list"},
		{"stock", "--tenant", "acme", "balance", "FLOUR-405"}, {"fin", "--tenant", "acme", "trial-balance"},
		{"val", "--tenant", "acme", "show", "NUT-M8"},
	}
	live := make([]cliResult, len(commands))
	for i, c := range commands {
		live[i] = runCLI(append([]string{"--db", db}, c...)...)
	}
	// The file is held: without the socket the same command cannot open it.
	runCLI("--db", db, "--socket", operatorSocketOff, "--lock-timeout", "100ms", "chains").expect(t, exitStorage, "locked")
	runCLI("--db", db, "--lock-timeout", "100ms", "append", "x", "--type", "t", "--data", "d").expect(t, exitStorage, "locked")
	server.stop()
	if _, err := os.Stat(db + operatorSocketSuffix); !os.IsNotExist(err) {
		t.Fatalf("socket after serve stopped: %v", err)
	}
	for i, c := range commands {
		direct := runCLI(append([]string{"--db", db}, c...)...)
		if live[i] != direct {
			t.Errorf("ledgerctl %s\nthrough the server: exit %d\n%s%s\non the stopped file: exit %d\n%s%s", strings.Join(c, " "),
				live[i].code, live[i].stdout, live[i].stderr, direct.code, direct.stdout, direct.stderr)
		}
	}
	if live[0].code != exitVerification || !strings.Contains(live[0].stdout, "acme/audit/erp-events seq 2: hash_mismatch") {
		t.Errorf("verify of the tampered chain through the server: exit %d\n%s", live[0].code, live[0].stdout)
	}
	if live[2].code != exitSuccess || live[3].code != exitVerification || live[9].code != exitNotFound {
		t.Errorf("exit codes through the server: %d %d %d, want 0 1 4", live[2].code, live[3].code, live[9].code)
	}
}

// TestOperatorSocketRefuses: the socket runs only the operator commands,
// for its own ledger; the HTTP API has no route to it; a --socket that
// does not answer is an error, not a silent fallback.
func TestOperatorSocketRefuses(t *testing.T) {
	db := operatorDemoLedger(t)
	server := startServe(t, db)
	socket := db + operatorSocketSuffix
	before := runCLI("--db", db, "chains").stdout
	refused := []operatorRequest{
		{Args: []string{"append", "acme/x", "--type", "t", "--data", "d"}},
		{Args: []string{"apikey", "create", "--tenant", "acme", "--scopes", "read"}},
		{Args: []string{"rebuild-state"}},
		{Args: []string{"serve"}},
		{Args: []string{"checkpoint", "--key", "k", "--every", "1m", "--out", "x"}},
		{Args: []string{"chains"}, DB: filepath.Join(t.TempDir(), "other.db")},
		{Args: []string{"--db=" + filepath.Join(t.TempDir(), "other.db"), "export", "--all", "--out=" + db}},
	}
	for _, req := range refused {
		body, err := operatorPost(context.Background(), socket, "/v1/run", req)
		if err != nil {
			t.Fatal(err)
		}
		var stderr bytes.Buffer
		code, err := relayFrames(body, io.Discard, &stderr, nil, nil)
		body.Close()
		if err != nil || code != exitUsage {
			t.Errorf("%v through the socket: exit %d, %v (stderr %q); want %d", req, code, err, stderr.String(), exitUsage)
		}
	}
	if after := runCLI("--db", db, "chains").stdout; after != before {
		t.Errorf("the chains changed through refused commands:\n%s\nbefore:\n%s", after, before)
	}
	for _, route := range []string{"/v1/run", "/v1/backup"} {
		resp, err := http.Post(server.base+route, "application/json", strings.NewReader(`{"args":["verify"]}`))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK || resp.Header.Get("Content-Type") == operatorContentType {
			t.Errorf("POST %s on the API port: %d %s", route, resp.StatusCode, resp.Header.Get("Content-Type"))
		}
	}
	missing := filepath.Join(t.TempDir(), "none.sock")
	runCLI("--db", db, "--socket", missing, "chains").expect(t, exitStorage, "operator socket")
	runCLI("--db", db, "--lock-timeout", "100ms", "append", "x", "--type", "t", "--data", "d").
		expect(t, exitStorage, "`ledgerctl serve` holds it (operator socket "+socket+")")
	// A server killed outright leaves its socket: nothing answers there, so
	// the commands open the file, and the next server replaces it.
	server.Kill()
	if _, err := os.Stat(socket); err != nil {
		t.Fatalf("the killed server's socket: %v", err)
	}
	if r := runCLI("--db", db, "chains"); r.code != exitSuccess || r.stdout != before {
		t.Fatalf("chains beside a stale socket: %+v", r)
	}
	server = startServe(t, db)
	if r := runCLI("--db", db, "chains"); r.code != exitSuccess || r.stdout != before {
		t.Fatalf("chains through the restarted server: %+v", r)
	}
	server.stop()
}

// TestOperatorFramesRoundTrip: what a frameWriter writes, a frameReader
// reads back, whatever the sizes.
func TestOperatorFramesRoundTrip(t *testing.T) {
	var stream bytes.Buffer
	fw := &frameWriter{w: &stream}
	big := bytes.Repeat([]byte("0123456789"), operatorFramePayloadMax/5)
	fmt.Fprint(fw.kind(frameStdout), "hello\n")
	fw.kind(frameData).Write(big)
	fw.kind(frameStderr).Write(nil)
	fw.write(frameInfo, []byte(`{"chains":1}`))
	fw.exit(exitVerification)
	var stdout, stderr, data bytes.Buffer
	var info []byte
	code, err := relayFrames(&stream, &stdout, &stderr, &data, func(p []byte) error { info = bytes.Clone(p); return nil })
	if err != nil || code != exitVerification || stdout.String() != "hello\n" || !bytes.Equal(data.Bytes(), big) ||
		stderr.Len() != 0 || string(info) != `{"chains":1}` {
		t.Fatalf("read back: code %d, %v, stdout %q, %d data bytes, info %q", code, err, stdout.String(), data.Len(), info)
	}
}

// FuzzOperatorFrames: any bytes read as frames either relay or fail with
// errOperatorStream (or end early); never a panic, never more bytes
// relayed than were read.
func FuzzOperatorFrames(f *testing.F) {
	var good bytes.Buffer
	fw := &frameWriter{w: &good}
	fmt.Fprint(fw.kind(frameStdout), "out")
	fmt.Fprint(fw.kind(frameStderr), "err")
	fw.exit(2)
	f.Add(good.Bytes())
	f.Add([]byte{'x', 0, 0, 0, 4, 0, 0, 1, 0})
	f.Add([]byte{'o', 0xff, 0xff, 0xff, 0xff})
	f.Add([]byte{'q', 0, 0, 0, 0})
	f.Fuzz(func(t *testing.T, stream []byte) {
		var out bytes.Buffer
		code, err := relayFrames(bytes.NewReader(stream), &out, &out, &out, func([]byte) error { return nil })
		if err == nil && (code < 0 || code > 255) {
			t.Fatalf("exit code %d", code)
		}
		if out.Len() > len(stream) {
			t.Fatalf("relayed %d bytes of %d", out.Len(), len(stream))
		}
	})
}

// jsonField decodes one JSON object.
func jsonField(t *testing.T, text string, v any) {
	t.Helper()
	if err := json.Unmarshal([]byte(text), v); err != nil {
		t.Fatalf("%v: %q", err, text)
	}
}

// TestOperatorSocketNamed: `serve --socket PATH` listens there and not
// beside the file; a command given only --socket PATH works on that
// server's ledger; --socket off opens none.
func TestOperatorSocketNamed(t *testing.T) {
	db := operatorDemoLedger(t)
	socket := filepath.Join(t.TempDir(), "op.sock")
	server := startServe(t, db, "--socket", socket)
	if _, err := os.Stat(db + operatorSocketSuffix); !os.IsNotExist(err) {
		t.Fatalf("default socket beside a server given --socket: %v", err)
	}
	live := runCLI("--socket", socket, "-o", "json", "chains")
	server.stop()
	if direct := runCLI("--db", db, "-o", "json", "chains"); live != direct || live.code != exitSuccess {
		t.Fatalf("chains through --socket: %+v; on the file: %+v", live, direct)
	}
	server = startServe(t, db, "--socket", operatorSocketOff)
	if _, err := os.Stat(db + operatorSocketSuffix); !os.IsNotExist(err) {
		t.Fatalf("socket of a server given --socket off: %v", err)
	}
	runCLI("--db", db, "--lock-timeout", "100ms", "chains").expect(t, exitStorage, "locked")
	server.stop()
}
