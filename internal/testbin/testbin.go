// Package testbin builds the project's commands for tests that run them as
// child processes (crash tests, end-to-end tests). A command is built on the
// first call in a test process, so `go test -list`, fuzz workers and runs of
// other tests never build it.
package testbin

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
)

var (
	once   sync.Once
	folder string
	path   string
	errB   error
)

// Ledgerctl builds cmd/ledgerctl into a temporary folder on its first call
// and returns the executable's path; a failed build fails every caller. A
// package's TestMain calls Remove after m.Run.
func Ledgerctl(t testing.TB) string {
	t.Helper()
	once.Do(func() {
		folder, errB = os.MkdirTemp("", "ledgerctl-test-")
		if errB != nil {
			return
		}
		path = filepath.Join(folder, "ledgerctl")
		if runtime.GOOS == "windows" {
			path += ".exe"
		}
		goTool, err := exec.LookPath("go")
		if err != nil {
			errB = fmt.Errorf("building ledgerctl: no go tool on PATH: %v", err)
			return
		}
		build := exec.Command(goTool, "build", "-o", path, "github.com/ledgerworks/ledger/cmd/ledgerctl")
		if out, err := build.CombinedOutput(); err != nil {
			errB = fmt.Errorf("building ledgerctl: %v\n%s", err, out)
		}
	})
	if errB != nil {
		t.Fatal(errB)
	}
	return path
}

// Remove deletes what Ledgerctl built, if anything.
func Remove() {
	if folder != "" {
		os.RemoveAll(folder)
	}
}

// Built returns the path Ledgerctl returned, or "" before a successful build:
// for goroutines other than a test's, which must not call t.Fatal.
func Built() string {
	if errB != nil {
		return ""
	}
	return path
}
