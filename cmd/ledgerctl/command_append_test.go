package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ledgerworks/ledger/chain"
)

func TestAppendPrintsTheEntryAndReplaysRetries(t *testing.T) {
	t.Parallel()
	for _, l := range testLedgers(t) {
		t.Run(l.backend, func(t *testing.T) {
			l.t = t
			l.must("init")
			var out strings.Builder
			out.WriteString(l.must("append", "acme/audit/events", "--type", "audit.event/v1", "--key", "k1", "--data", `{"event":"opened"}`))
			out.WriteString(l.must("-o", "json", "append", "acme/audit/events", "--type", "audit.event/v1", "--key", "k2", "--data", "second"))
			out.WriteString(l.must("-o", "json", "append", "acme/audit/events", "--type", "audit.event/v1", "--key", "k1", "--data", `{"event":"opened"}`))
			out.WriteString(l.must("append", "acme/audit/events", "--type", "audit.event/v1", "--key", "k1", "--data", `{"event":"opened"}`))
			golden(t, "append", out.String())
		})
	}
}

func TestAppendJSONShape(t *testing.T) {
	t.Parallel()
	l := newFileLedger(t)
	l.must("init")
	first := l.must("-o", "json", "append", "acme/x", "--type", "t/v1", "--key", "k", "--data", "payload")
	retry := l.must("-o", "json", "append", "acme/x", "--type", "t/v1", "--key", "k", "--data", "payload")
	var fields map[string]any
	if err := json.Unmarshal([]byte(first), &fields); err != nil {
		t.Fatal(err)
	}
	want := []string{"chain", "seq", "time_unix_nano", "idempotency_key", "type", "prev_hash", "hash", "replayed"}
	if len(fields) != len(want) {
		t.Fatalf("fields %v, want exactly %v", fields, want)
	}
	for _, name := range want {
		if _, ok := fields[name]; !ok {
			t.Fatalf("field %q missing from %s", name, first)
		}
	}
	var a, b appendedJSON
	if err := json.Unmarshal([]byte(first), &a); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal([]byte(retry), &b); err != nil {
		t.Fatal(err)
	}
	if a.Replayed || !b.Replayed {
		t.Fatalf("replayed: first %v retry %v", a.Replayed, b.Replayed)
	}
	b.Replayed = false
	if a != b {
		t.Fatalf("the retry printed another entry:\n%+v\n%+v", a, b)
	}
	if a.PrevHash != chain.Genesis("acme/x").String() {
		t.Fatalf("seq 1 prev_hash %s is not the genesis", a.PrevHash)
	}
}

func TestAppendConflictExits3AndWritesNothing(t *testing.T) {
	t.Parallel()
	for _, l := range testLedgers(t) {
		t.Run(l.backend, func(t *testing.T) {
			l.t = t
			l.must("init")
			l.must("append", "acme/x", "--type", "t/v1", "--key", "k", "--data", "one")
			l.must("append", "acme/x", "--type", "t/v1", "--key", "other", "--data", "two")
			before := l.snapshot()
			r := l.run("-o", "json", "append", "acme/x", "--type", "t/v1", "--key", "k", "--data", "changed")
			r.expect(t, exitConflict, `"code":"IDEMPOTENCY_CONFLICT"`)
			var e errorJSON
			if err := json.Unmarshal([]byte(r.stderr), &e); err != nil {
				t.Fatalf("stderr is not a JSON error: %q", r.stderr)
			}
			if e.Error.ExistingSeq != 1 {
				t.Fatalf("existing_seq %d, want 1", e.Error.ExistingSeq)
			}
			if r.stdout != "" {
				t.Fatalf("stdout %q on a conflict", r.stdout)
			}
			l.run("append", "acme/x", "--type", "t/v2", "--key", "k", "--data", "one").expect(t, exitConflict, "held by seq 1")
			if after := l.snapshot(); after != before {
				t.Fatalf("a conflict wrote:\n%s\n%s", before, after)
			}
		})
	}
}

func TestAppendRefusesBadInputAndWritesNothing(t *testing.T) {
	t.Parallel()
	l := newFileLedger(t)
	l.must("init")
	l.must("append", "acme/x", "--type", "t/v1", "--data", "one")
	before := l.snapshot()
	cases := []struct {
		name   string
		args   []string
		stdin  string
		code   int
		stderr string
	}{
		{"control character in chain", []string{"append", "acme/\x01x", "--type", "t", "--data", "d"}, "", exitUsage, "INVALID_INPUT"},
		{"empty chain", []string{"append", "", "--type", "t", "--data", "d"}, "", exitUsage, "INVALID_INPUT"},
		{"long key", []string{"append", "acme/x", "--type", "t", "--key", strings.Repeat("k", chain.IdempotencyKeyLengthMax+1), "--data", "d"}, "", exitUsage, "INVALID_INPUT"},
		{"empty type", []string{"append", "acme/x", "--type", "", "--data", "d"}, "", exitUsage, "INVALID_INPUT"},
		{"no type", []string{"append", "acme/x", "--data", "d"}, "", exitUsage, "--type is required"},
		{"no data", []string{"append", "acme/x", "--type", "t"}, "", exitUsage, "--data is required"},
		{"no chain", []string{"append", "--type", "t", "--data", "d"}, "", exitUsage, "USAGE"},
		{"two chains", []string{"append", "a", "b", "--type", "t", "--data", "d"}, "", exitUsage, "USAGE"},
		{"unknown flag", []string{"append", "acme/x", "--type", "t", "--data", "d", "--colour"}, "", exitUsage, "USAGE"},
		{"missing data file", []string{"append", "acme/x", "--type", "t", "--data", "@" + filepath.Join(l.dir, "missing")}, "", exitUsage, "INVALID_INPUT"},
		{"payload too large", []string{"append", "acme/x", "--type", "t", "--data", "-"}, strings.Repeat("x", chain.PayloadSizeMaxDefault+1), exitUsage, "INVALID_INPUT"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			l.t = t
			l.runWithInput(c.stdin, append([]string{"-o", "json"}, c.args...)...).expect(t, c.code, c.stderr)
		})
	}
	l.t = t
	if after := l.snapshot(); after != before {
		t.Fatalf("refused appends wrote:\n%s\n%s", before, after)
	}
}

func TestAppendReadsDataFromAFileAndStandardInput(t *testing.T) {
	t.Parallel()
	l := newFileLedger(t)
	l.must("init")
	path := filepath.Join(l.dir, "payload.bin")
	payload := []byte{0, 1, 2, 0xff, '\n'}
	if err := os.WriteFile(path, payload, 0o600); err != nil {
		t.Fatal(err)
	}
	l.must("append", "acme/x", "--type", "t", "--data", "@"+path)
	if r := l.runWithInput("from stdin\n", "append", "acme/x", "--type", "t", "--data", "-"); r.code != 0 {
		t.Fatalf("stdin append: %+v", r)
	}
	db := l.open()
	defer db.Close()
	e1, err := db.Get(t.Context(), "acme/x", 1)
	if err != nil {
		t.Fatal(err)
	}
	e2, err := db.Get(t.Context(), "acme/x", 2)
	if err != nil {
		t.Fatal(err)
	}
	if string(e1.Payload) != string(payload) || string(e2.Payload) != "from stdin\n" {
		t.Fatalf("payloads %q %q", e1.Payload, e2.Payload)
	}
}

func TestAppendOnAMissingLedgerExits5AndCreatesNothing(t *testing.T) {
	t.Parallel()
	l := newFileLedger(t)
	l.run("-o", "json", "append", "acme/x", "--type", "t", "--data", "d").expect(t, exitStorage, `"code":"STORAGE"`)
	if _, err := os.Stat(l.name); !os.IsNotExist(err) {
		t.Fatalf("ledger file created: %v", err)
	}
}
