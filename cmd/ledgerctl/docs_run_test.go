package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ledgerworks/ledger/internal/testbin"
)

// The pages whose shell blocks TestDocs runs, top to bottom.
var runnablePages = []string{"QUICKSTART.md", "SERVER.md"}

// docsPageTimeout bounds one page's run.
const docsPageTimeout = 3 * time.Minute

// docBlock is a ```sh block of a page and the ```text block that shows its
// output, when one follows it.
type docBlock struct {
	line     int    // the line of its opening fence
	script   string // the commands
	expected string // the output the page shows, "" when it shows none
	shown    bool   // the page shows an output
	requires string // a tool the block needs beside bash and curl, "" for none
}

// notRunMarker, on the line before a ```sh block, keeps the block out of the
// run (it installs the tool, or names a deployment's hosts).
const notRunMarker = "<!-- not run"

// requiresMarker, on the line before a ```sh block, names a tool the block
// needs (`<!-- requires openssl -->`): where the tool is missing the block
// is left out, and the blocks after it must not depend on it.
const requiresMarker = "<!-- requires "

// parseDocBlocks returns the runnable ```sh blocks of a page, each with the
// ```text block that follows it (blank lines between them allowed).
func parseDocBlocks(page string) ([]docBlock, error) {
	lines := strings.Split(page, "\n")
	var blocks []docBlock
	for i := 0; i < len(lines); i++ {
		info, ok := strings.CutPrefix(lines[i], "```")
		if !ok || info == "" {
			continue
		}
		end := i + 1
		for end < len(lines) && lines[end] != "```" {
			end++
		}
		if end == len(lines) {
			return nil, fmt.Errorf("line %d: the block never ends", i+1)
		}
		body := strings.Join(lines[i+1:end], "\n") + "\n"
		switch {
		case info == "sh" && !(i > 0 && strings.HasPrefix(lines[i-1], notRunMarker)):
			b := docBlock{line: i + 1, script: body}
			if i > 0 {
				if tool, ok := strings.CutPrefix(lines[i-1], requiresMarker); ok {
					b.requires = strings.TrimSpace(strings.TrimSuffix(tool, "-->"))
				}
			}
			blocks = append(blocks, b)
		case info == "text" && len(blocks) > 0 && !blocks[len(blocks)-1].shown && onlyBlankBetween(lines, blocks[len(blocks)-1].line, i):
			blocks[len(blocks)-1].expected, blocks[len(blocks)-1].shown = body, true
		}
		i = end
	}
	return blocks, nil
}

// onlyBlankBetween reports whether the lines between the end of the block
// that opens on line open (1-based) and line i (0-based) are blank.
func onlyBlankBetween(lines []string, open, i int) bool {
	j := open
	for j < len(lines) && lines[j] != "```" {
		j++
	}
	for j++; j < i; j++ {
		if strings.TrimSpace(lines[j]) != "" {
			return false
		}
	}
	return true
}

// outputPattern turns a shown output into a pattern: "…" stands for any
// text (several lines too), everything else is literal. Blank lines and
// trailing spaces are left out of both sides.
func outputPattern(shown string) *regexp.Regexp {
	parts := strings.Split(normalizeOutput(shown), "…")
	for i, p := range parts {
		parts[i] = regexp.QuoteMeta(p)
	}
	return regexp.MustCompile(`(?s)\A` + strings.Join(parts, ".*?") + `\z`)
}

// normalizeOutput drops carriage returns (curl -i), trailing spaces and
// blank lines.
func normalizeOutput(s string) string {
	var kept []string
	for _, line := range strings.Split(strings.ReplaceAll(s, "\r", ""), "\n") {
		line = strings.TrimRight(line, " \t")
		if line != "" {
			kept = append(kept, line)
		}
	}
	return strings.Join(kept, "\n")
}

// TestDocs runs the ```sh blocks of the pages in runnablePages as a reader
// would: in order, in one bash session in an empty folder, with the built
// ledgerctl on PATH. Every block must succeed (the session runs with errexit
// and pipefail, so a failing command fails its block), and print what the
// page shows under it. LEDGER_ADDR is a free port, so that pages that start
// a server on it do not collide with anything else on the machine.
func TestDocs(t *testing.T) {
	for _, tool := range []string{"bash", "curl"} {
		if _, err := exec.LookPath(tool); err != nil {
			if os.Getenv("CI") == "true" {
				t.Fatalf("%s is not on PATH", tool)
			}
			t.Skipf("%s is not on PATH", tool)
		}
	}
	binary := testbin.Ledgerctl(t)
	for _, name := range runnablePages {
		t.Run(name, func(t *testing.T) {
			page, err := os.ReadFile(filepath.Join("..", "..", "docs", name))
			if err != nil {
				t.Fatal(err)
			}
			blocks, err := parseDocBlocks(string(page))
			if err != nil {
				t.Fatalf("docs/%s: %v", name, err)
			}
			if len(blocks) == 0 {
				t.Fatalf("docs/%s has no ```sh block to run", name)
			}
			runDocBlocks(t, name, filepath.Dir(binary), blocks)
		})
	}
}

// runDocBlocks runs a page's blocks in one bash session and checks each.
func runDocBlocks(t *testing.T, page, binDir string, blocks []docBlock) {
	dir := t.TempDir()
	var driver strings.Builder
	driver.WriteString("set -eo pipefail\n")
	for i, b := range blocks {
		if b.requires != "" {
			if _, err := exec.LookPath(b.requires); err != nil {
				t.Logf("docs/%s: the block at line %d is left out: it needs %s", page, b.line, b.requires)
				blocks[i].shown = false
				fmt.Fprintf(&driver, "echo left out > .status-%d\n", i)
				continue
			}
		}
		script := filepath.Join(dir, fmt.Sprintf(".block-%d.sh", i))
		if err := os.WriteFile(script, []byte(b.script), 0o600); err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&driver, "source %s > .out-%d 2> .err-%d\necho done > .status-%d\n", script, i, i, i)
	}
	ctx, cancel := context.WithTimeout(context.Background(), docsPageTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "--noprofile", "--norc", "-c", driver.String())
	cmd.Dir = dir
	cmd.Env = docsEnvironment(t, binDir)
	// The session and what it starts in the background (a server) form
	// one process group, ended as a whole.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	t.Cleanup(func() {
		if cmd.Process != nil {
			syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		}
	})
	runErr := cmd.Run()
	for i, b := range blocks {
		out, _ := os.ReadFile(filepath.Join(dir, fmt.Sprintf(".out-%d", i)))
		stderr, _ := os.ReadFile(filepath.Join(dir, fmt.Sprintf(".err-%d", i)))
		where := fmt.Sprintf("docs/%s, the block at line %d", page, b.line)
		if _, err := os.Stat(filepath.Join(dir, fmt.Sprintf(".status-%d", i))); err != nil {
			t.Fatalf("%s failed (%v):\n%s\nstdout:\n%s\nstderr:\n%s%s", where, runErr, b.script, out, stderr, docLogs(dir))
		}
		if b.shown && !outputPattern(b.expected).MatchString(normalizeOutput(string(out))) {
			t.Fatalf("%s printed what the page does not show:\n--- printed\n%s\n--- shown (… is any text)\n%s\nstderr:\n%s",
				where, out, b.expected, stderr)
		}
	}
	if runErr != nil {
		t.Fatalf("docs/%s: %v", page, runErr)
	}
}

// docLogs returns the end of every *.log file the page's commands left (a
// server's log), to show why a block failed.
func docLogs(dir string) string {
	names, _ := filepath.Glob(filepath.Join(dir, "*.log"))
	var b strings.Builder
	for _, name := range names {
		data, err := os.ReadFile(name)
		if err != nil {
			continue
		}
		lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
		lines = lines[max(0, len(lines)-20):]
		fmt.Fprintf(&b, "\n%s (its last lines):\n%s\n", filepath.Base(name), strings.Join(lines, "\n"))
	}
	return b.String()
}

// docsEnvironment is the test's environment without LEDGER_ variables, with
// the built ledgerctl first on PATH and LEDGER_ADDR a free port.
func docsEnvironment(t *testing.T, binDir string) []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "LEDGER_") && !strings.HasPrefix(kv, "PATH=") {
			env = append(env, kv)
		}
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	return append(env, "PATH="+binDir+string(os.PathListSeparator)+os.Getenv("PATH"),
		"LEDGER_ADDR=127.0.0.1:"+strconv.Itoa(port))
}

// The parser keeps the blocks marked not run out, pairs an output with the
// block before it, and the pattern's … matches any text.
func TestDocBlocksParse(t *testing.T) {
	page := "intro\n\n```sh\necho a\n```\n\n```text\na…\n```\n\n" + notRunMarker + ": installs -->\n```sh\ngo install x\n```\n" +
		"```json\n{}\n```\n" + requiresMarker + "openssl -->\n```sh\necho b\n```\n"
	blocks, err := parseDocBlocks(page)
	if err != nil {
		t.Fatal(err)
	}
	if len(blocks) != 2 || blocks[0].script != "echo a\n" || !blocks[0].shown || blocks[0].expected != "a…\n" ||
		blocks[1].script != "echo b\n" || blocks[1].shown || blocks[1].requires != "openssl" || blocks[0].requires != "" {
		t.Fatalf("blocks %+v", blocks)
	}
	if !outputPattern("a…\n…z").MatchString(normalizeOutput("abc\r\n\nxyz\n")) || outputPattern("a…").MatchString("ba") {
		t.Fatal("pattern")
	}
	if _, err := parseDocBlocks("```sh\necho\n"); err == nil {
		t.Fatal("an unterminated block parsed")
	}
}
