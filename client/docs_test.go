package client_test

import (
	"context"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"
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
