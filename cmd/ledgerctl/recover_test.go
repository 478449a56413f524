package main

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestPanicEndsAsExit5: a panic that reaches the command line (here from the
// clock, the one piece of the engine a test can make panic) ends as exit 5
// with one line, CORRUPT with -o json, never a Go trace.
func TestPanicEndsAsExit5(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ledger.db")
	var out bytes.Buffer
	if code := execute(context.Background(), newApp(), []string{"--db", path, "init"}, strings.NewReader(""), &out, &out); code != 0 {
		t.Fatalf("init: exit %d %s", code, out.String())
	}
	for _, output := range []string{"text", "json"} {
		a := newApp()
		a.clock = func() time.Time { panic("clock failure") }
		var stdout, stderr bytes.Buffer
		code := execute(context.Background(), a, []string{"--db", path, "-o", output, "append", "c", "--type", "raw/v1", "--data", "x"},
			strings.NewReader(""), &stdout, &stderr)
		if code != exitStorage {
			t.Errorf("-o %s: exit %d, want %d; stderr %q", output, code, exitStorage, stderr.String())
		}
		message := stderr.String()
		if strings.Count(message, "\n") != 1 || !strings.Contains(message, "clock failure") || strings.Contains(message, "goroutine ") {
			t.Errorf("-o %s: stderr %q; want one line naming the panic", output, message)
		}
		if output == "json" && !strings.Contains(message, `"CORRUPT"`) {
			t.Errorf("-o json: stderr %q; want code CORRUPT", message)
		}
	}
}
