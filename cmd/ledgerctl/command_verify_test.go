package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	bbolt "go.etcd.io/bbolt"

	"github.com/ledgerworks/ledger/chain"
	"github.com/ledgerworks/ledger/storage/bolt"
)

func TestVerifyIntactLedger(t *testing.T) {
	t.Parallel()
	for _, l := range testLedgers(t) {
		t.Run(l.backend, func(t *testing.T) {
			l.t = t
			l.seed()
			out := l.must("verify") + l.must("-o", "json", "verify") + l.must("verify", "acme/audit/events", "globex/audit/sign-ins")
			golden(t, "verify_intact", out)
		})
	}
}

func TestVerifyFindsATamperedEntry(t *testing.T) {
	t.Parallel()
	l := newFileLedger(t)
	l.seed()
	flipPayloadByte(t, l.name, "acme/audit/events", 3)
	text := l.run("verify")
	text.expect(t, exitVerification, "verification failed")
	r := l.run("-o", "json", "verify")
	r.expect(t, exitVerification, `"code":"VERIFICATION_FAILED"`)
	golden(t, "verify_tampered", text.stdout+r.stdout)
	var report verifyJSON
	if err := json.Unmarshal([]byte(r.stdout), &report); err != nil {
		t.Fatal(err)
	}
	if report.OK || len(report.Failures) != 1 || report.Failures[0].Chain != "acme/audit/events" ||
		report.Failures[0].Seq != 3 || report.Failures[0].Reason != string(chain.ReasonHashMismatch) {
		t.Fatalf("report %+v", report)
	}
	// Another chain alone is intact, named twice or not.
	if got := l.must("verify", "globex/audit/sign-ins", "globex/audit/sign-ins"); got != "intact: 1 chain, 1 entry verified\n" {
		t.Fatalf("verify of one chain named twice: %q", got)
	}
}

func TestVerifyExpectHeadCatchesATruncation(t *testing.T) {
	t.Parallel()
	l := newFileLedger(t)
	l.seed()
	saved := strings.TrimSpace(l.must("head", "acme/audit/events"))
	db := l.open()
	previous, err := db.Get(context.Background(), "acme/audit/events", 4)
	db.Close()
	if err != nil {
		t.Fatal(err)
	}
	truncateChain(t, l.name, "acme/audit/events", previous.Head())
	// The truncated chain is consistent with its stored head…
	l.must("verify")
	// …but not with the head saved before.
	r := l.run("-o", "json", "verify", "--expect-head", saved)
	r.expect(t, exitVerification, "VERIFICATION_FAILED")
	var report verifyJSON
	if err := json.Unmarshal([]byte(r.stdout), &report); err != nil {
		t.Fatal(err)
	}
	if len(report.Failures) != 1 || report.Failures[0].Reason != string(chain.ReasonHeadMismatch) || report.Failures[0].Seq != 5 {
		t.Fatalf("report %+v", report)
	}
	// A saved head of a chain that is gone altogether.
	r = l.run("-o", "json", "verify", "acme/deleted", "--expect-head", "acme/deleted:2:"+strings.Repeat("ab", 32))
	r.expect(t, exitVerification, "VERIFICATION_FAILED")
	if !strings.Contains(r.stdout, `"reason":"head_mismatch"`) {
		t.Fatalf("stdout %s", r.stdout)
	}
}

func TestVerifyErrors(t *testing.T) {
	t.Parallel()
	l := newFileLedger(t)
	l.seed()
	cases := []struct {
		name   string
		args   []string
		code   int
		stderr string
	}{
		{"missing chain", []string{"verify", "acme/nothing"}, exitNotFound, "not found"},
		{"bad chain", []string{"verify", "acme/\x7f"}, exitUsage, "INVALID_INPUT"},
		{"expect-head without seq", []string{"verify", "--expect-head", "acme/x:" + strings.Repeat("ab", 32)}, exitUsage, "CHAIN:SEQ:HASH"},
		{"expect-head seq 0", []string{"verify", "--expect-head", "acme/x:0:" + strings.Repeat("ab", 32)}, exitUsage, "not a number from 1"},
		{"expect-head short hash", []string{"verify", "--expect-head", "acme/x:1:abcd"}, exitUsage, "hex digits"},
		{"file with chains", []string{"verify", "--file", "x.jsonl", "acme/x"}, exitUsage, "name no chains"},
		{"missing file", []string{"verify", "--file", filepath.Join(l.dir, "missing.jsonl")}, exitUsage, "INVALID_INPUT"},
		{"missing ledger", []string{"--db", filepath.Join(l.dir, "missing.db"), "verify"}, exitStorage, "STORAGE"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			l.t = t
			l.run(append([]string{"-o", "json"}, c.args...)...).expect(t, c.code, c.stderr)
		})
	}
}

func TestVerifyExpectHeadTakesChainIdsWithColons(t *testing.T) {
	t.Parallel()
	l := newFileLedger(t)
	l.must("init")
	l.must("append", "acme:eu/x", "--type", "t", "--data", "d")
	head := strings.TrimSpace(l.must("head", "acme:eu/x"))
	heads, err := parseExpectHeads([]string{head})
	if err != nil || len(heads) != 1 || heads[0].Chain != "acme:eu/x" || heads[0].Seq != 1 {
		t.Fatalf("%+v %v", heads, err)
	}
	l.must("verify", "--expect-head", head)
}

func TestVerifyFile(t *testing.T) {
	t.Parallel()
	l := newFileLedger(t)
	l.seed()
	export := filepath.Join(l.dir, "export.jsonl")
	out := l.must("export", "--all", "--out", export)
	savedHead := "acme/audit/events:5:" + headHash(t, out, "acme/audit/events")
	lines := readLines(t, export)

	intact := l.run("-o", "json", "verify", "--file", export, "--expect-head", savedHead)
	if intact.code != 0 || !strings.Contains(intact.stdout, `"ok":true,"chains":"3","entries":"8"`) {
		t.Fatalf("%+v", intact)
	}
	// The export's lines of acme/audit/events are its first five.
	tampered := writeLines(t, l.dir, "tampered.jsonl", replaceLine(lines, 2, `"payload":"eyJldmVudCI6ImUzIn0="`, `"payload":"eyJldmVudCI6ImU0In0="`))
	truncated := writeLines(t, l.dir, "truncated.jsonl", append(append([]string{}, lines[:4]...), lines[5:]...))
	cut := writeLines(t, l.dir, "cut.jsonl", append(append([]string{}, lines[:3]...), lines[3][:40]))
	var text strings.Builder
	for _, c := range []struct {
		name, file, reason string
		seq                uint64
		args               []string
	}{
		{"tampered", tampered, "hash_mismatch", 3, nil},
		{"truncated", truncated, "head_mismatch", 5, []string{"--expect-head", savedHead}},
		{"cut", cut, "undecodable", 4, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			l.t = t
			r := l.run(append([]string{"-o", "json", "verify", "--file", c.file}, c.args...)...)
			r.expect(t, exitVerification, "VERIFICATION_FAILED")
			var report verifyJSON
			if err := json.Unmarshal([]byte(r.stdout), &report); err != nil {
				t.Fatal(err)
			}
			if report.OK || len(report.Failures) == 0 || report.Failures[0].Reason != c.reason || report.Failures[0].Seq != c.seq {
				t.Fatalf("report %+v, want %s at seq %d first", report, c.reason, c.seq)
			}
			// The decoder's own words for an undecodable line are the
			// engine's, not the command line's: left out of the golden.
			r = l.run(append([]string{"verify", "--file", c.file}, c.args...)...)
			text.WriteString(regexp.MustCompile(`(?m)(export line:).*$`).ReplaceAllString(l.normalize(r.stdout), "$1 …"))
		})
	}
	l.t = t
	// Without the saved head, the truncated export is a consistent, shorter chain.
	l.must("verify", "--file", truncated)
	// Standard input.
	content, err := os.ReadFile(export)
	if err != nil {
		t.Fatal(err)
	}
	if r := l.runWithInput(string(content), "verify", "--file", "-"); r.code != 0 {
		t.Fatalf("%+v", r)
	}
	golden(t, "verify_file_broken", text.String())
}

func TestVerifyMergesDerivedStateChecks(t *testing.T) {
	t.Parallel()
	l := newFileLedger(t)
	l.seed()
	flipPayloadByte(t, l.name, "acme/scanner/WH-1/dock-2", 2)
	db := l.open()
	defer db.Close()
	check := func(ctx context.Context, db *chain.DB) ([]chain.Failure, error) {
		return []chain.Failure{
			{Chain: "globex/audit/sign-ins", Seq: 1, Reason: chain.ReasonStateMismatch, Detail: "balance"},
			{Chain: "acme/audit/events", Seq: 2, Reason: chain.ReasonStateMismatch, Detail: "count"},
		}, nil
	}
	checks := []registeredCheck{{name: "test", check: check}}
	report, err := verifyDatabase(context.Background(), db, chain.VerifyOptions{}, checks, true)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, f := range report.Failures {
		got = append(got, f.Chain+"#"+jsonNumber(f.Seq)+":"+string(f.Reason))
	}
	want := "acme/audit/events#2:state_mismatch acme/scanner/WH-1/dock-2#2:hash_mismatch globex/audit/sign-ins#1:state_mismatch"
	if strings.Join(got, " ") != want {
		t.Fatalf("failures %v, want %s", got, want)
	}
	report, err = verifyDatabase(context.Background(), db, chain.VerifyOptions{Chains: []string{"globex/audit/sign-ins"}}, checks, false)
	if err != nil || !report.OK() {
		t.Fatalf("checks ran on a named chain: %+v %v", report, err)
	}
}

// headHash finds a chain's hash in export's "head CHAIN:SEQ:HASH" lines.
func headHash(t *testing.T, exportOutput, chainName string) string {
	t.Helper()
	for _, line := range strings.Split(exportOutput, "\n") {
		if rest, ok := strings.CutPrefix(line, "head "+chainName+":"); ok {
			return rest[strings.IndexByte(rest, ':')+1:]
		}
	}
	t.Fatalf("no head of %s in %q", chainName, exportOutput)
	return ""
}

func readLines(t *testing.T, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
}

func writeLines(t *testing.T, dir, name string, lines []string) string {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// replaceLine returns lines with old replaced by new in line i, failing
// when line i does not hold old.
func replaceLine(lines []string, i int, old, new string) []string {
	if !strings.Contains(lines[i], old) {
		panic("line " + lines[i] + " does not hold " + old)
	}
	changed := append([]string{}, lines...)
	changed[i] = strings.Replace(lines[i], old, new, 1)
	return changed
}

// TestVerifyReportsADamagedKeyIndex: an idempotency key index that maps a
// key to another entry is a key_index_mismatch at the entry whose key it is,
// and exits 1; the chain itself still links.
func TestVerifyReportsADamagedKeyIndex(t *testing.T) {
	t.Parallel()
	l := newFileLedger(t)
	l.seed()
	db, err := bbolt.Open(l.name, bolt.FileMode, &bbolt.Options{Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	err = db.Update(func(tx *bbolt.Tx) error { return bolt.SetKeySeq(tx, "acme/audit/events", "event-2", 4) })
	if closeErr := db.Close(); err == nil {
		err = closeErr
	}
	if err != nil {
		t.Fatal(err)
	}
	r := l.run("-o", "json", "verify")
	r.expect(t, exitVerification, `"code":"VERIFICATION_FAILED"`)
	var report verifyJSON
	if err := json.Unmarshal([]byte(r.stdout), &report); err != nil {
		t.Fatal(err)
	}
	if report.OK || len(report.Failures) != 1 || report.Failures[0].Chain != "acme/audit/events" ||
		report.Failures[0].Seq != 2 || report.Failures[0].Reason != string(chain.ReasonKeyIndexMismatch) ||
		!strings.Contains(report.Failures[0].Detail, "event-2") {
		t.Fatalf("report %+v", report)
	}
	text := l.run("verify", "acme/audit/events")
	text.expect(t, exitVerification, "verification failed")
	if !strings.Contains(text.stdout, "acme/audit/events seq 2: key_index_mismatch: ") {
		t.Fatalf("text report %q", text.stdout)
	}
}
