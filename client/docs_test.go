package client_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ledgerworks/ledger/api"
)

// docBlock returns the first fenced block of language lang after heading
// in docs/CLIENT.md.
func docBlock(t *testing.T, heading, lang string) string {
	t.Helper()
	doc, err := os.ReadFile("../docs/CLIENT.md")
	if err != nil {
		t.Fatal(err)
	}
	_, after, ok := strings.Cut(string(doc), "\n"+heading+"\n")
	if !ok {
		t.Fatalf("docs/CLIENT.md has no heading %q", heading)
	}
	m := regexp.MustCompile("(?s)```" + lang + "\n(.*?)```").FindStringSubmatch(after)
	if m == nil {
		t.Fatalf("docs/CLIENT.md has no %s block after %q", lang, heading)
	}
	return m[1]
}

// runDocExample runs an example of docs/CLIENT.md against a served ledger,
// with LEDGER_URL and LEDGER_TOKEN set as the page says.
func runDocExample(t *testing.T, tool string, args ...string) string {
	t.Helper()
	t.Parallel()
	if _, err := exec.LookPath(tool); err != nil {
		t.Skipf("%s is not installed", tool)
	}
	s, _, token := startLedger(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, tool, args...)
	cmd.Env = append(os.Environ(), "LEDGER_URL="+s.URL, "LEDGER_TOKEN="+token)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s: %v\n%s\nserver:\n%s", tool, err, out, s.Output())
	}
	return string(out)
}

func TestDocCurlExample(t *testing.T) {
	if _, err := exec.LookPath("curl"); err != nil {
		t.Skip("curl is not installed")
	}
	out := runDocExample(t, "sh", "-c", docBlock(t, "## curl", "sh"))
	if n := strings.Count(out, "HTTP/1.1 201"); n != 2 {
		t.Fatalf("want two 201 answers, got %d:\n%s", n, out)
	}
	if !regexp.MustCompile(`(?i)\nIdempotent-Replayed: true\r?\n`).MatchString(out) {
		t.Fatalf("the retry was not a replay:\n%s", out)
	}
	bodies := regexp.MustCompile(`\{"chain".*\}`).FindAllString(out, -1)
	if len(bodies) != 2 || bodies[0] != bodies[1] {
		t.Fatalf("bodies %q: want the same body twice", bodies)
	}
}

func TestDocPythonExample(t *testing.T) {
	out := runDocExample(t, "python3", "-c", docBlock(t, "## Python (standard library only)", "python"))
	if !strings.Contains(out, "seq 1 replayed on retry: True") {
		t.Fatalf("python printed:\n%s", out)
	}
}

// TestDocPythonRetries runs the Python example's ledger_call against a
// server on 127.0.0.1 that hangs up, answers 503, 429, 409
// REQUEST_IN_PROGRESS and a proxy's 502 page, then 201: the example must
// retry each with the same key and body, and not retry a final answer.
func TestDocPythonRetries(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("python3 is not installed")
	}
	fn, _, ok := strings.Cut(docBlock(t, "## Python (standard library only)", "python"), "\nentry, replayed = ")
	if !ok {
		t.Fatal("the Python example no longer calls ledger_call as this test expects")
	}
	problemOf := func(status int, code string) func(http.ResponseWriter) {
		return func(w http.ResponseWriter) {
			w.Header().Set("Content-Type", "application/problem+json")
			w.Header().Set("Retry-After", "0")
			w.WriteHeader(status)
			fmt.Fprintf(w, `{"type":"urn:ledgerworks:problem:%s","status":%d,"code":%q}`, code, status, code)
		}
	}
	for _, tc := range []struct {
		name     string
		steps    []func(http.ResponseWriter)
		attempts int
		fails    string
	}{
		{"transient answers", []func(http.ResponseWriter){
			nil, // hang up
			problemOf(503, api.CodeStoreUnavailable), problemOf(429, api.CodeRateLimited), problemOf(409, api.CodeInProgress),
			func(w http.ResponseWriter) { http.Error(w, "<html>bad gateway</html>", http.StatusBadGateway) },
			func(w http.ResponseWriter) {
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(201)
				io.WriteString(w, `{"chain":"audit/x","seq":"1","hash":"ab","time_unix_nano":"1"}`)
			}}, 6, ""},
		{"key reused", []func(http.ResponseWriter){problemOf(409, api.CodeKeyReused)}, 1, "409 " + api.CodeKeyReused},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var mu sync.Mutex
			var keys, bodies []string
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				body, _ := io.ReadAll(r.Body)
				mu.Lock()
				n := len(keys)
				keys, bodies = append(keys, r.Header.Get(api.HeaderIdempotencyKey)), append(bodies, string(body))
				mu.Unlock()
				step := tc.steps[min(n, len(tc.steps)-1)]
				if step == nil {
					conn, _, _ := http.NewResponseController(w).Hijack()
					conn.Close()
					return
				}
				step(w)
			}))
			defer srv.Close()
			script := fn + "\n" + `print(ledger_call("POST", "/v1/chains/audit/x/entries", {"type": "t", "payload": "cA=="}, base=0.01))` + "\n"
			cmd := exec.Command("python3", "-c", script)
			cmd.Env = append(os.Environ(), "LEDGER_URL="+srv.URL, "LEDGER_TOKEN=lw_test")
			out, err := cmd.CombinedOutput()
			if (err != nil) != (tc.fails != "") || !strings.Contains(string(out), tc.fails) {
				t.Fatalf("python: %v\n%s", err, out)
			}
			mu.Lock()
			defer mu.Unlock()
			if len(keys) != tc.attempts {
				t.Fatalf("%d attempts, want %d\n%s", len(keys), tc.attempts, out)
			}
			for i := range keys {
				if keys[i] != keys[0] || bodies[i] != bodies[0] || keys[0] == "" {
					t.Fatalf("attempt %d sent key %q body %q; attempt 1 %q %q", i+1, keys[i], bodies[i], keys[0], bodies[0])
				}
			}
		})
	}
}
