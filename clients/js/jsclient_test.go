package jsclient_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	jsclient "github.com/ledgerworks/ledger/clients/js"
	"github.com/ledgerworks/ledger/internal/testbin"
)

func TestMain(m *testing.M) {
	code := m.Run()
	testbin.Remove()
	os.Exit(code)
}

// nodeMajorMin is the oldest Node.js the module supports (package.json's
// engines).
const nodeMajorMin = 20

// nodeTestTimeout bounds the whole node --test run.
const nodeTestTimeout = 5 * time.Minute

// TestNode runs the client's own tests (node --test test/) against a real
// ledgerctl serve, so that go test ./... covers the JavaScript client. It
// skips when no Node.js of at least version 20 is on PATH.
func TestNode(t *testing.T) {
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("node is not on PATH: the JavaScript client's tests need Node.js >= 20 (Debian: apt-get install nodejs)")
	}
	out, err := exec.Command(node, "--version").Output()
	if err != nil {
		t.Skipf("node --version: %v", err)
	}
	version := strings.TrimSpace(string(out))
	m := regexp.MustCompile(`^v([0-9]+)\.`).FindStringSubmatch(version)
	if m == nil {
		t.Skipf("node --version printed %q", version)
	}
	if major, _ := strconv.Atoi(m[1]); major < nodeMajorMin {
		t.Skipf("node %s: the JavaScript client's tests need Node.js >= %d", version, nodeMajorMin)
	}
	bin := testbin.Ledgerctl(t)
	ctx, cancel := context.WithTimeout(context.Background(), nodeTestTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, "--test", "--test-reporter=spec", "test/")
	cmd.Env = append(os.Environ(), "LEDGER_BIN="+bin, "NO_COLOR=1")
	var buf bytes.Buffer
	cmd.Stdout, cmd.Stderr = &buf, &buf
	if err := cmd.Run(); err != nil {
		t.Fatalf("node --test test/ (%s): %v\n%s", version, err, buf.String())
	}
	if !strings.Contains(buf.String(), "every operation of /openapi.json was called at least once") {
		t.Fatalf("node --test ran without the route coverage test:\n%s", buf.String())
	}
	t.Logf("node %s: %d lines of test output", version, strings.Count(buf.String(), "\n"))
}

// The embedded bytes are the files, and the three versions agree.
func TestEmbedded(t *testing.T) {
	for name, embedded := range map[string][]byte{"ledger.js": jsclient.Module, "ledger.d.ts": jsclient.Declarations} {
		onDisk, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(onDisk, embedded) || len(embedded) == 0 {
			t.Errorf("%s: the embedded bytes differ from the file", name)
		}
	}
	raw, err := os.ReadFile("package.json")
	if err != nil {
		t.Fatal(err)
	}
	var pkg struct {
		Name, Version, Type, Types, License string
		Engines                             map[string]string
		Files                               []string
		Exports                             map[string]any
	}
	if err := json.Unmarshal(raw, &pkg); err != nil {
		t.Fatal(err)
	}
	if pkg.Version != jsclient.Version || !bytes.Contains(jsclient.Module, []byte(`export const VERSION = "`+jsclient.Version+`";`)) {
		t.Errorf("versions: package.json %s, Version %s, ledger.js's VERSION must agree", pkg.Version, jsclient.Version)
	}
	if pkg.Type != "module" || pkg.Types != "./ledger.d.ts" || pkg.License != "Apache-2.0" || pkg.Engines["node"] != ">=20" || pkg.Exports["."] == nil {
		t.Errorf("package.json: %+v", pkg)
	}
	for _, f := range pkg.Files {
		if _, err := os.Stat(f); err != nil {
			t.Errorf("package.json lists %s: %v", f, err)
		}
	}
}
