package main

import (
	"bytes"
	"context"
	"encoding/binary"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	bbolt "go.etcd.io/bbolt"

	"github.com/ledgerworks/ledger/chain"
	"github.com/ledgerworks/ledger/storage/bolt"
	"github.com/ledgerworks/ledger/storage/postgres/pgtest"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/cli")

// goldenDirectory holds the expected outputs of the in-process tests.
const goldenDirectory = "../../testdata/cli"

// clockStart is the first time the fixed test clock returns.
var clockStart = time.Date(2026, 11, 2, 9, 0, 0, 0, time.UTC)

// testLedger is a ledger the in-process tests run commands against.
type testLedger struct {
	t       *testing.T
	backend string // "bolt" or "postgres"
	name    string // the --db value
	dir     string // a temporary folder for the test's files
	next    time.Time
}

// newFileLedger returns a ledger file (not yet created) in a fresh folder,
// with a clock that starts at clockStart and advances a second per reading.
func newFileLedger(t *testing.T) *testLedger {
	dir := t.TempDir()
	return &testLedger{t: t, backend: "bolt", name: filepath.Join(dir, "ledger.db"), dir: dir, next: clockStart}
}

// testLedgers returns a file ledger and, when LEDGER_TEST_POSTGRES_URL is
// set, a PostgreSQL ledger on a fresh schema; neither is initialized.
func testLedgers(t *testing.T) []*testLedger {
	ledgers := []*testLedger{newFileLedger(t)}
	if pgtest.Available(t) {
		ledgers = append(ledgers, newPostgresLedger(t))
	}
	return ledgers
}

// newPostgresLedger creates an empty schema (dropped at cleanup) and returns
// a URL whose search_path selects it.
func newPostgresLedger(t *testing.T) *testLedger {
	return &testLedger{t: t, backend: "postgres", name: pgtest.SchemaURL(t, pgtest.URL(t)), dir: t.TempDir(), next: clockStart}
}

// cliResult is what one command line produced.
type cliResult struct {
	stdout, stderr string
	code           int
}

// run runs one command line in-process against the ledger (its --db comes
// first, so args may override it) with the fixed clock.
func (l *testLedger) run(args ...string) cliResult {
	return l.runWithInput("", args...)
}

// runWithInput is run with standard input.
func (l *testLedger) runWithInput(stdin string, args ...string) cliResult {
	l.t.Helper()
	a := &app{
		clock: func() time.Time {
			now := l.next
			l.next = l.next.Add(time.Second)
			return now
		},
		environment: func(string) string { return "" },
	}
	var stdout, stderr bytes.Buffer
	code := execute(context.Background(), a, append([]string{"--db", l.name}, args...), strings.NewReader(stdin), &stdout, &stderr)
	return cliResult{stdout: stdout.String(), stderr: stderr.String(), code: code}
}

// must runs a command line that has to succeed and returns its stdout.
func (l *testLedger) must(args ...string) string {
	l.t.Helper()
	r := l.run(args...)
	if r.code != 0 {
		l.t.Fatalf("ledgerctl %s: exit %d, stderr %q", strings.Join(args, " "), r.code, r.stderr)
	}
	return r.stdout
}

// expect checks a result's exit code and that stderr holds want.
func (r cliResult) expect(t *testing.T, code int, stderrHolds string) {
	t.Helper()
	if r.code != code {
		t.Fatalf("exit %d, want %d; stdout %q stderr %q", r.code, code, r.stdout, r.stderr)
	}
	if !strings.Contains(r.stderr, stderrHolds) {
		t.Fatalf("stderr %q does not hold %q", r.stderr, stderrHolds)
	}
}

// open opens the ledger in-process, read-only, for checks behind the CLI's back.
func (l *testLedger) open() *chain.DB {
	l.t.Helper()
	a := &app{database: l.name, lockTimeout: time.Second}
	db, err := a.openDB(context.Background(), true)
	if err != nil {
		l.t.Fatal(err)
	}
	return db
}

// snapshot describes a ledger's content: every chain's head, for checking
// that a refused command wrote nothing.
func (l *testLedger) snapshot() string {
	l.t.Helper()
	db := l.open()
	defer db.Close()
	var b strings.Builder
	for h, err := range db.Chains(context.Background(), "") {
		if err != nil {
			l.t.Fatal(err)
		}
		b.WriteString(h.Chain + ":" + h.Hash.String() + "\n")
	}
	return b.String()
}

// normalize replaces what differs between runs (the temporary folder) so
// that outputs can be compared with golden files.
func (l *testLedger) normalize(s string) string {
	s = strings.ReplaceAll(s, l.name, "$DB")
	return strings.ReplaceAll(s, l.dir, "$DIR")
}

// golden compares got with testdata/cli/name.golden, or rewrites the file
// with -update.
func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join(goldenDirectory, name+".golden")
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test ./cmd/ledgerctl -update to create it)", err)
	}
	if got != string(want) {
		t.Errorf("output differs from %s (run with -update to accept it):\n--- got\n%s\n--- want\n%s", path, got, want)
	}
}

// tamperFile changes a stored ledger file behind the engine's back: fn gets
// the bbolt transaction and the chain's numeric id.
func tamperFile(t *testing.T, path, chainName string, fn func(tx *bbolt.Tx, chainID uint64) error) {
	t.Helper()
	db, err := bbolt.Open(path, bolt.FileMode, &bbolt.Options{Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	err = db.Update(func(tx *bbolt.Tx) error {
		v := tx.Bucket(bolt.BucketChains).Get([]byte(chainName))
		if v == nil {
			t.Fatalf("chain %q not in the file", chainName)
		}
		return fn(tx, binary.BigEndian.Uint64(v[:8]))
	})
	if err != nil {
		t.Fatal(err)
	}
}

// flipPayloadByte changes the last byte of a stored entry (its payload).
func flipPayloadByte(t *testing.T, path, chainName string, seq uint64) {
	tamperFile(t, path, chainName, func(tx *bbolt.Tx, id uint64) error {
		v := append([]byte(nil), bolt.RawEntry(tx, id, seq)...)
		if len(v) == 0 {
			t.Fatalf("no entry %q seq %d", chainName, seq)
		}
		v[len(v)-1] ^= 1
		return bolt.PutRawEntry(tx, id, seq, v)
	})
}

// truncateChain removes a chain's newest entry together with its stored
// head, which becomes the previous entry's: the chain still verifies, and
// only a head saved elsewhere can tell.
func truncateChain(t *testing.T, path, chainName string, previous chain.Head) {
	tamperFile(t, path, chainName, func(tx *bbolt.Tx, id uint64) error {
		// A thorough truncation: the newest entry, its key's index record
		// (which verify would report as naming a seq past the end) and the head.
		removed, err := chain.DecodeRecord(chainName, previous.Seq+1, bolt.RawEntry(tx, id, previous.Seq+1))
		if err != nil {
			return err
		}
		if removed.IdempotencyKey != "" {
			if err := bolt.DeleteKeyRecord(tx, chainName, removed.IdempotencyKey); err != nil {
				return err
			}
		}
		if err := bolt.DeleteRawEntry(tx, id, previous.Seq+1); err != nil {
			return err
		}
		// And the chain's Merkle tree (see chain/tree.go), which would
		// still hold the removed entry: only a checkpoint catches this.
		if err := tx.Bucket(bolt.BucketState).Delete([]byte("\x00tree/v1/r/" + chainName)); err != nil {
			return err
		}
		v := make([]byte, 8+8+chain.HashSize+8)
		binary.BigEndian.PutUint64(v[0:8], id)
		binary.BigEndian.PutUint64(v[8:16], previous.Seq)
		copy(v[16:48], previous.Hash[:])
		binary.BigEndian.PutUint64(v[48:56], uint64(previous.TimeUnixNano))
		return tx.Bucket(bolt.BucketChains).Put([]byte(chainName), v)
	})
}

// seed initializes the ledger and appends a small, known set of entries:
// acme/audit/events seq 1–5, acme/scanner/WH-1/dock-2 seq 1–2 (one binary
// payload), globex/audit/sign-ins seq 1.
func (l *testLedger) seed() {
	l.t.Helper()
	if l.backend != "bolt" {
		// The same entries, by one import instead of eight appends (each
		// command connects anew): the import keeps times and hashes, so
		// outputs match the file ledger's.
		file := newFileLedger(l.t)
		file.next = l.next
		file.seed()
		export := filepath.Join(file.dir, "seed.jsonl")
		file.must("export", "--all", "--out", export)
		l.must("init")
		l.must("import", "--file", export)
		l.next = file.next
		return
	}
	l.must("init")
	for i := 1; i <= 5; i++ {
		l.must("append", "acme/audit/events", "--type", "audit.event/v1", "--key", "event-"+string(rune('0'+i)),
			"--data", `{"event":"e`+string(rune('0'+i))+`"}`)
	}
	l.must("append", "acme/scanner/WH-1/dock-2", "--type", "scan/v1", "--key", "scan-1", "--data", "+10")
	l.mustWithInput("\x00\x01binary\n", "append", "acme/scanner/WH-1/dock-2", "--type", "scan/v1", "--data", "-")
	l.must("append", "globex/audit/sign-ins", "--type", "audit.sign_in/v1", "--key", "s-1", "--data", "user mrossi signed in at HQ")
}

// mustWithInput is must with standard input.
func (l *testLedger) mustWithInput(stdin string, args ...string) string {
	l.t.Helper()
	r := l.runWithInput(stdin, args...)
	if r.code != 0 {
		l.t.Fatalf("ledgerctl %s: exit %d, stderr %q", strings.Join(args, " "), r.code, r.stderr)
	}
	return r.stdout
}
