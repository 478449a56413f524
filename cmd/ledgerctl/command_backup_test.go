package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/ledgerworks/ledger/chain"
	"github.com/ledgerworks/ledger/internal/testbin"
	"github.com/ledgerworks/ledger/storage/postgres/pgtest"
)

// ackedEntry is an entry the server acknowledged with 201.
type ackedEntry struct {
	Seq  uint64 `json:"seq"`
	Hash string `json:"hash"`
}

// appendLoad appends to chain "load" through the HTTP API until ctx ends,
// recording every acknowledged entry in order.
func appendLoad(ctx context.Context, base, token string, acked *[]ackedEntry, mu *sync.Mutex) error {
	for i := 0; ctx.Err() == nil; i++ {
		body := fmt.Sprintf(`{"type":"load/v1","payload":%q}`, base64.StdEncoding.EncodeToString(fmt.Appendf(nil, "entry %d", i)))
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/v1/chains/load/entries", strings.NewReader(body))
		if err != nil {
			return err
		}
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Idempotency-Key", fmt.Sprintf("load-%d", i))
		resp, err := http.DefaultClient.Do(req)
		if ctx.Err() != nil {
			return nil
		}
		if err != nil {
			return err
		}
		var answer struct { // the HTTP API writes 64-bit integers as strings
			Seq  uint64 `json:"seq,string"`
			Hash string `json:"hash"`
		}
		err = json.NewDecoder(resp.Body).Decode(&answer)
		e := ackedEntry{Seq: answer.Seq, Hash: answer.Hash}
		resp.Body.Close()
		if resp.StatusCode != http.StatusCreated || err != nil {
			return fmt.Errorf("append %d: %d, %v", i, resp.StatusCode, err)
		}
		mu.Lock()
		*acked = append(*acked, e)
		mu.Unlock()
	}
	return nil
}

// TestBackupDuringLoad backs up a ledger that a `ledgerctl serve` child
// holds while a writer appends through its HTTP API: the backup goes
// through the operator socket, and the restored copy holds every entry
// acknowledged before the backup, verifies, and extends the checkpoint and
// the head saved before the backup.
func TestBackupDuringLoad(t *testing.T) {
	db := operatorDemoLedger(t)
	dir := filepath.Dir(db)
	var key struct{ Token string }
	jsonField(t, runCLI("--db", db, "-o", "json", "apikey", "create", "--tenant", "acme", "--scopes", "read,write").stdout, &key)
	signer, verifier := filepath.Join(dir, "cp.key"), filepath.Join(dir, "cp.pub")
	if r := runCLI("keygen", "backup.test/ledger", "--key", signer, "--pub", verifier); r.code != exitSuccess {
		t.Fatalf("keygen: %+v", r)
	}
	server := startServe(t, db)
	ctx, cancel := context.WithCancel(context.Background())
	var mu sync.Mutex
	var acked []ackedEntry
	writerDone := make(chan error, 1)
	go func() { writerDone <- appendLoad(ctx, server.base, key.Token, &acked, &mu) }()
	ackedCount := func() int { mu.Lock(); defer mu.Unlock(); return len(acked) }
	waitFor := func(n int) {
		for deadline := time.Now().Add(time.Minute); ackedCount() < n; time.Sleep(5 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("the writer acknowledged %d entries in a minute", ackedCount())
			}
		}
	}
	waitFor(30)
	checkpoint := filepath.Join(dir, "before.checkpoint")
	if r := runCLI("--db", db, "checkpoint", "--key", signer, "--out", checkpoint); r.code != exitSuccess {
		t.Fatalf("checkpoint through the server: %+v", r)
	}
	headBefore := strings.TrimSpace(runCLI("--db", db, "head", "acme/load").stdout)
	mu.Lock()
	before := append([]ackedEntry(nil), acked...)
	mu.Unlock()
	backupFile := filepath.Join(dir, "backup.db")
	r := runCLI("--db", db, "-o", "json", "backup", "--out", backupFile)
	if r.code != exitSuccess {
		t.Fatalf("backup during load: %+v", r)
	}
	var summary backupSummary
	jsonField(t, r.stdout, &summary)
	afterBackup := ackedCount()
	waitFor(afterBackup + 20) // the server kept serving
	cancel()
	if err := <-writerDone; err != nil {
		t.Fatal(err)
	}
	server.stop()

	if !summary.ThroughServer || summary.Out != backupFile {
		t.Fatalf("backup summary %+v: want through the server, to %s", summary, backupFile)
	}
	var captured uint64
	for _, h := range summary.Heads {
		if h.Chain == "acme/load" {
			captured = h.Seq
		}
	}
	if captured < uint64(len(before)) || captured > uint64(afterBackup) {
		t.Fatalf("the backup captured acme/load at %d: %d were acknowledged before it, %d when it returned", captured, len(before), afterBackup)
	}
	restored := filepath.Join(dir, "restored.db")
	r = runCLI("--db", restored, "restore", "--from", backupFile, "--expect-head", headBefore, "--checkpoint", checkpoint, "--key", verifier)
	if r.code != exitSuccess || !strings.Contains(r.stdout, "intact:") {
		t.Fatalf("restore: %+v", r)
	}
	for _, e := range before {
		var got ackedEntry
		jsonField(t, runCLI("--db", restored, "-o", "json", "get", "acme/load", fmt.Sprint(e.Seq)).stdout, &got)
		if got != e {
			t.Fatalf("restored acme/load seq %d: %+v, acknowledged %+v", e.Seq, got, e)
		}
	}
	if r := runCLI("--db", restored, "verify", "--checkpoint", checkpoint, "--key", verifier, "--expect-head", headBefore); r.code != exitSuccess {
		t.Fatalf("verify of the restored copy against the checkpoint and head from before the backup: %+v", r)
	}
	if r := runCLI("--db", restored, "head", "acme/load"); !strings.HasPrefix(r.stdout, fmt.Sprintf("acme/load:%d:", captured)) {
		t.Fatalf("restored head %q, captured %d", r.stdout, captured)
	}
	// The copy is a ledger of its own: it takes writes, and the original
	// still verifies with everything written after the backup.
	if r := runCLI("--db", restored, "append", "acme/load", "--type", "load/v1", "--data", "after restore"); r.code != exitSuccess {
		t.Fatalf("append to the restored ledger: %+v", r)
	}
	if r := runCLI("--db", db, "verify"); r.code != exitSuccess {
		t.Fatalf("the original after the backup: %+v", r)
	}
	// Restore refuses to put a backup over an existing ledger unless told,
	// and over a ledger a server holds at all.
	runCLI("--db", restored, "restore", "--from", backupFile).expect(t, exitUsage, "--replace")
	server = startServe(t, restored)
	runCLI("--db", restored, "restore", "--from", backupFile, "--replace").expect(t, exitStorage, "stop it first")
	server.stop()
}

// TestBackupWithoutServer: with no server, backup opens the file itself;
// --out - writes the copy to stdout and the summary to stderr; the copy
// opens, verifies and holds the same heads; a file that is not a backup
// of a ledger is refused by restore, nothing put in place.
func TestBackupWithoutServer(t *testing.T) {
	l := newFileLedger(t)
	l.seed()
	file := filepath.Join(l.dir, "copy.db")
	r := l.run("backup", "--out", file)
	if r.code != exitSuccess || !strings.HasPrefix(r.stdout, "backup of 3 chains, 8 entries written to "+file+" from the file\n") {
		t.Fatalf("backup: %+v", r)
	}
	for _, line := range strings.Split(strings.TrimSpace(r.stdout), "\n")[1:] {
		if got := l.run("--db", file, "verify", "--expect-head", line); got.code != exitSuccess {
			t.Fatalf("verify --expect-head %s on the copy: %+v", line, got)
		}
	}
	r = l.run("backup", "--out", "-")
	if r.code != exitSuccess || !strings.HasPrefix(r.stderr, "backup of 3 chains") {
		t.Fatalf("backup --out -: exit %d, stderr %q", r.code, r.stderr)
	}
	streamed := filepath.Join(l.dir, "streamed.db")
	if err := os.WriteFile(streamed, []byte(r.stdout), 0o600); err != nil {
		t.Fatal(err)
	}
	if a, b := l.run("--db", streamed, "chains").stdout, l.run("chains").stdout; a != b {
		t.Fatalf("the streamed copy's chains\n%s\nthe ledger's\n%s", a, b)
	}
	// --replace keeps the ledger it replaces, moved aside, never deleted.
	l.must("append", "acme/audit/events", "--type", "audit.event/v1", "--data", "after the backup")
	replaced := l.snapshot()
	r = l.run("restore", "--from", file, "--replace")
	if r.code != exitSuccess || !strings.Contains(r.stdout, "the previous ledger was moved to "+l.name+".replaced-") {
		t.Fatalf("restore --replace: %+v", r)
	}
	aside, _ := filepath.Glob(l.name + ".replaced-*")
	if len(aside) != 1 {
		t.Fatalf("moved aside: %v", aside)
	}
	if got := l.run("--db", aside[0], "head", "acme/audit/events").stdout; !strings.HasPrefix(got, "acme/audit/events:6:") {
		t.Fatalf("the ledger moved aside ends at %q, want seq 6", got)
	}
	if l.snapshot() == replaced || !strings.HasPrefix(l.must("head", "acme/audit/events"), "acme/audit/events:5:") {
		t.Fatal("restore --replace did not put the backup in place")
	}
	l.run("backup").expect(t, exitUsage, "--out")
	l.run("backup", "--out", l.name).expect(t, exitUsage, "overwrite the ledger")
	junk := filepath.Join(l.dir, "junk")
	os.WriteFile(junk, bytes.Repeat([]byte{7}, 8192), 0o600)
	target := filepath.Join(l.dir, "target.db")
	if r := l.run("--db", target, "restore", "--from", junk); r.code != exitStorage {
		t.Fatalf("restore of a file that is no ledger: %+v", r)
	}
	if _, err := os.Stat(target); !os.IsNotExist(err) {
		t.Fatalf("restore of a bad file left %s: %v", target, err)
	}
	if leftovers, _ := filepath.Glob(filepath.Join(l.dir, ".target.db.restore-*")); len(leftovers) != 0 {
		t.Fatalf("restore left %v", leftovers)
	}
}

// TestBackupKilledMidWrite kills a backup child while it writes: the
// target path holds nothing, or the complete previous backup, never a
// part of a copy; a later backup to the same path succeeds.
func TestBackupKilledMidWrite(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "big.db")
	fillLedger(t, db, 96, 512<<10) // about 48 MiB: the copy and its sync take a while
	target := filepath.Join(dir, "target.db")
	killMidWrite := func() bool { return killBackupMidWrite(t, db, target) }
	kills := 0
	for attempt := 0; attempt < 5 && kills == 0; attempt++ {
		if killMidWrite() {
			kills++
		} else {
			os.Remove(target) // it finished first: try again from nothing
		}
	}
	if kills == 0 {
		t.Fatal("the backup always finished before it could be killed mid-write")
	}
	if _, err := os.Stat(target); !os.IsNotExist(err) {
		t.Fatalf("after a backup killed mid-write, %s: %v; want nothing", target, err)
	}
	if r := runCLI("--db", db, "backup", "--out", target); r.code != exitSuccess {
		t.Fatalf("backup after the kill: %+v", r)
	}
	complete := fileDigest(t, target)
	for attempt := 0; attempt < 5; attempt++ {
		if killMidWrite() {
			break
		}
	}
	if fileDigest(t, target) != complete {
		t.Fatal("a backup killed mid-write changed the complete backup at the target")
	}
	if r := runCLI("--db", target, "verify"); r.code != exitSuccess {
		t.Fatalf("the complete backup: %+v", r)
	}
}

// killBackupMidWrite runs `ledgerctl backup --out target` as a child and
// kills it (SIGKILL) once its temporary file holds bytes; it reports
// whether it did before the backup finished.
func killBackupMidWrite(t *testing.T, db, target string) bool {
	t.Helper()
	cmd := exec.Command(testbin.Ledgerctl(t), "--db", db, "backup", "--out", target)
	cmd.Env = newProcess(t).env
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	pattern := filepath.Join(filepath.Dir(target), "."+filepath.Base(target)+".backup-*")
	for {
		select {
		case <-exited:
			return false
		default:
		}
		temps, _ := filepath.Glob(pattern)
		for _, tmp := range temps {
			if info, err := os.Stat(tmp); err == nil && info.Size() > 0 {
				cmd.Process.Signal(syscall.SIGKILL)
				<-exited
				return true
			}
		}
		time.Sleep(200 * time.Microsecond)
	}
}

// TestBackupClientKilledThroughServer kills a backup that streams from a
// `serve` child: the target holds nothing, and the server, which ends the
// copy when its client goes away, keeps serving and backs up again.
func TestBackupClientKilledThroughServer(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "big.db")
	fillLedger(t, db, 96, 512<<10)
	server := startServe(t, db)
	target := filepath.Join(dir, "target.db")
	killed := false
	for attempt := 0; attempt < 5 && !killed; attempt++ {
		if killed = killBackupMidWrite(t, db, target); !killed {
			os.Remove(target)
		}
	}
	if !killed {
		t.Fatal("the backup always finished before it could be killed mid-write")
	}
	if _, err := os.Stat(target); !os.IsNotExist(err) {
		t.Fatalf("after a backup killed mid-write, %s: %v; want nothing", target, err)
	}
	r := runCLI("--db", db, "-o", "json", "backup", "--out", target)
	var summary backupSummary
	if r.code != exitSuccess {
		t.Fatalf("backup after the kill: %+v", r)
	}
	jsonField(t, r.stdout, &summary)
	if !summary.ThroughServer || summary.Entries != 96 {
		t.Fatalf("backup after the kill: %+v", summary)
	}
	server.stop()
	if r := runCLI("--db", target, "verify"); r.code != exitSuccess {
		t.Fatalf("the backup: %+v", r)
	}
}

// fillLedger writes n entries of size random bytes to one chain.
func fillLedger(t *testing.T, path string, n, size int) {
	t.Helper()
	db, err := chain.Open(path, chain.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	payload := make([]byte, size)
	for i := 0; i < n; i++ {
		rand.Read(payload)
		if _, err := db.Append(context.Background(), chain.Request{Chain: "bulk/data", Type: "blob/v1", Payload: payload}); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
}

func fileDigest(t *testing.T, path string) [32]byte {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return sha256.Sum256(data)
}

// TestPostgresDumpRestore follows docs/OPERATIONS.md on PostgreSQL: a
// checkpoint, pg_dump of the ledger's schema, the schema lost, pg_restore,
// and verify of the restored ledger against the checkpoint taken before
// the dump.
func TestPostgresDumpRestore(t *testing.T) {
	if !pgtest.Available(t) {
		t.Skip("LEDGER_TEST_POSTGRES_URL is not set")
	}
	pgDump, err := exec.LookPath("pg_dump")
	if err != nil {
		t.Skip("pg_dump is not installed")
	}
	pgRestore, err := exec.LookPath("pg_restore")
	if err != nil {
		t.Skip("pg_restore is not installed")
	}
	l := newPostgresLedger(t)
	l.seed()
	u, err := url.Parse(l.name)
	if err != nil {
		t.Fatal(err)
	}
	schema := u.Query().Get("search_path")
	base := pgtest.URL(t)
	signer, verifier := filepath.Join(l.dir, "cp.key"), filepath.Join(l.dir, "cp.pub")
	l.must("keygen", "backup.test/pg", "--key", signer, "--pub", verifier)
	checkpoint := filepath.Join(l.dir, "before.checkpoint")
	l.must("checkpoint", "--key", signer, "--out", checkpoint)
	head := strings.TrimSpace(l.must("head", "acme/audit/events"))
	dump := filepath.Join(l.dir, "ledger.dump")
	if out, err := exec.Command(pgDump, "--dbname="+base, "--schema="+schema, "--format=custom", "--file="+dump).CombinedOutput(); err != nil {
		t.Fatalf("pg_dump: %v\n%s", err, out)
	}
	l.must("append", "acme/audit/events", "--type", "audit.event/v1", "--data", "after the dump")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	conn, err := pgx.Connect(ctx, base)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "DROP SCHEMA "+pgx.Identifier{schema}.Sanitize()+" CASCADE"); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(pgRestore, "--dbname="+base, "--exit-on-error", dump).CombinedOutput(); err != nil {
		t.Fatalf("pg_restore: %v\n%s", err, out)
	}
	if r := l.run("verify", "--checkpoint", checkpoint, "--key", verifier, "--expect-head", head); r.code != exitSuccess {
		t.Fatalf("verify of the restored schema against the checkpoint from before the dump: %+v", r)
	}
	if got := strings.TrimSpace(l.must("head", "acme/audit/events")); got != head {
		t.Fatalf("restored head %s, dumped %s", got, head)
	}
	l.must("append", "acme/audit/events", "--type", "audit.event/v1", "--data", "after the restore")
	// backup and restore copy files: on PostgreSQL they name pg_dump.
	l.run("backup", "--out", filepath.Join(l.dir, "x.db")).expect(t, exitUsage, "pg_dump")
	l.run("restore", "--from", dump).expect(t, exitUsage, "pg_restore")
}

// TestDemoBacksUp: the demo's backup step leaves a copy beside the ledger
// that verifies on its own and holds the head it saved before the backup.
func TestDemoBacksUp(t *testing.T) {
	t.Parallel()
	r := runRaw(t, "demo", "--dir", t.TempDir())
	if r.code != exitSuccess {
		t.Fatalf("demo: %+v", r)
	}
	first, _, _ := strings.Cut(r.stdout, "\n")
	path := strings.TrimPrefix(first, "ledger: ")
	_, rest, ok := strings.Cut(r.stdout, "head saved before the backup: ")
	head, _, _ := strings.Cut(rest, "\n")
	if !ok || !strings.Contains(r.stdout, "the copy verifies on its own: intact") {
		t.Fatalf("demo output lacks the backup step:\n%s", r.stdout)
	}
	if v := runRaw(t, "--db", path+".backup", "verify", "--expect-head", head); v.code != exitSuccess {
		t.Fatalf("verify of the demo's backup with the saved head %s: %+v", head, v)
	}
}
