package idempotency_test

import (
	"flag"
	"log/slog"
	"os"
	"testing"
)

// TestMain lowers rapid's default number of checks: every check of the
// ledger store's machine creates a ledger file. -rapid.checks still wins.
func TestMain(m *testing.M) {
	flag.Parse()
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == "rapid.checks" })
	if !set {
		flag.Set("rapid.checks", "25")
	}
	os.Exit(m.Run())
}

// discardLogger drops every line (for benchmarks).
var discardLogger = slog.New(slog.DiscardHandler)
