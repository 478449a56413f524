package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/ledgerworks/ledger/chain"
	"github.com/ledgerworks/ledger/decimal"
	"github.com/ledgerworks/ledger/storage"
)

func TestClassifyMapsEveryErrorClass(t *testing.T) {
	t.Parallel()
	wrap := func(err error) error { return fmt.Errorf("context: %w", err) }
	cases := []struct {
		err  error
		exit int
		code string
	}{
		{wrap(errVerificationFailed), exitVerification, codeVerification},
		{usageErrorf("bad flag"), exitUsage, codeUsage},
		{wrap(&chain.InvalidError{Field: "chain", Err: chain.ErrInvalidChain, Reason: "empty"}), exitUsage, codeInvalidInput},
		{invalidInputf("bad file"), exitUsage, codeInvalidInput},
		{wrap(&chain.ConflictError{ExistingSeq: 4}), exitConflict, codeConflict},
		{wrap(chain.ErrNotFound), exitNotFound, codeNotFound},
		{wrap(errLedgerMissing), exitStorage, codeStorage},
		{wrap(chain.ErrLocked), exitStorage, codeLocked},
		{wrap(storage.ErrLocked), exitStorage, codeLocked},
		{wrap(chain.ErrCorrupt), exitStorage, codeCorrupt},
		{wrap(&chain.DecodeError{Chain: "a", Seq: 1, Reason: "short"}), exitStorage, codeCorrupt},
		{wrap(storage.ErrIO), exitStorage, codeStorage},
		{wrap(decimal.ErrOverflow), exitUsage, codeInvalidInput},
		{wrap(decimal.ErrSyntax), exitUsage, codeInvalidInput},
		{wrap(context.Canceled), exitStorage, codeCanceled},
		{errors.New("disk full"), exitStorage, codeStorage},
	}
	for _, c := range cases {
		exit, code := classify(c.err)
		if exit != c.exit || code != c.code {
			t.Errorf("classify(%v) = %d %s, want %d %s", c.err, exit, code, c.exit, c.code)
		}
	}
}

func TestReportErrorPrintsOneLine(t *testing.T) {
	t.Parallel()
	var text, asJSON bytes.Buffer
	err := fmt.Errorf("first line\nsecond line: %w", &chain.ConflictError{Chain: "a", IdempotencyKey: "k", ExistingSeq: 7})
	if code := reportError(&text, false, err); code != exitConflict {
		t.Fatalf("exit %d", code)
	}
	if got := text.String(); strings.Count(got, "\n") != 1 || !strings.HasPrefix(got, "ledgerctl: first line second line") {
		t.Fatalf("text error %q", got)
	}
	reportError(&asJSON, true, err)
	var e errorJSON
	if err := json.Unmarshal(asJSON.Bytes(), &e); err != nil || strings.Count(asJSON.String(), "\n") != 1 {
		t.Fatalf("JSON error %q: %v", asJSON.String(), err)
	}
	if e.Error.Code != codeConflict || e.Error.ExistingSeq != 7 || !strings.Contains(e.Error.Message, "held by seq 7") {
		t.Fatalf("JSON error %+v", e)
	}
}

func TestUsageErrorsExit2(t *testing.T) {
	t.Parallel()
	l := newFileLedger(t)
	l.must("init")
	for _, args := range [][]string{
		{"no-such-command"},
		{"chains", "extra"},
		{"-o", "yaml", "chains"},
		{"--lock-timeout", "-1s", "chains"},
		{"--lock-timeout", "soon", "chains"},
		{"--no-such-flag", "chains"},
		{"--log-level", "loud", "chains"},
	} {
		r := l.run(args...)
		if r.code != exitUsage || !strings.HasPrefix(r.stderr, "ledgerctl: ") {
			t.Errorf("%q: exit %d stderr %q, want exit 2", args, r.code, r.stderr)
		}
	}
	r := l.run("-o", "json", "no-such-command")
	r.expect(t, exitUsage, `{"error":{"code":"USAGE"`)
}

func TestDatabaseNameComesFromFlagThenEnvironmentThenDefault(t *testing.T) {
	t.Parallel()
	a := &app{environment: func(string) string { return "" }}
	if got := a.databaseName(); got != databaseDefault {
		t.Fatalf("default %q", got)
	}
	a.environment = func(name string) string {
		if name == databaseEnvironment {
			return "/from/env.db"
		}
		return ""
	}
	if got := a.databaseName(); got != "/from/env.db" {
		t.Fatalf("environment %q", got)
	}
	a.database = "/from/flag.db"
	if got := a.databaseName(); got != "/from/flag.db" {
		t.Fatalf("flag %q", got)
	}
}
