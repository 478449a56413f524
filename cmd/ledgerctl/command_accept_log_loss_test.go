package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/ledgerworks/ledger/chain"
	"github.com/ledgerworks/ledger/storage/bolt"
)

// crashedLedger appends n entries keyed order-<i> to chain acme/x of the
// ledger at path through the log, in segments of 4 KiB, and leaves the file
// and its log as a process killed before Close would: the entries are in
// the log only. (It copies both while the ledger is open, then puts the
// copies back after the Close.)
func crashedLedger(t *testing.T, path string, n int) {
	t.Helper()
	b, err := bolt.Open(path, bolt.Options{Log: bolt.LogOn, MemtableBytesMax: 1 << 40, LogSegmentSizeBytes: 4 << 10,
		InitialMmapSize: 1 << 20, EntryKey: chain.RecordKey})
	if err != nil {
		t.Fatal(err)
	}
	db, err := chain.OpenBackend(b, chain.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= n; i++ {
		_, err := db.Append(context.Background(), chain.Request{Chain: "acme/x", IdempotencyKey: fmt.Sprintf("order-%d", i),
			Type: "t/v1", Payload: fmt.Appendf(nil, "paid %d", i)})
		if err != nil {
			t.Fatal(err)
		}
	}
	dir := bolt.LogDirectory(path)
	saved := map[string][]byte{}
	for _, name := range append([]string{path}, mustGlob(t, filepath.Join(dir, "*"))...) {
		data, err := os.ReadFile(name)
		if errors.Is(err, os.ErrNotExist) {
			continue // a spare segment the log renamed while it was read: not part of the image
		}
		if err != nil {
			t.Fatal(err)
		}
		saved[name] = data
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	for name, data := range saved {
		if err := os.WriteFile(name, data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
}

func mustGlob(t *testing.T, pattern string) []string {
	t.Helper()
	names, err := filepath.Glob(pattern)
	if err != nil {
		t.Fatal(err)
	}
	return names
}

func logSegments(t *testing.T, path string) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(bolt.LogDirectory(path), "*.wal"))
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(files)
	return files
}

func TestAcceptLogLossAfterADamagedLog(t *testing.T) {
	t.Parallel()
	l := newFileLedger(t)
	crashedLedger(t, l.name, 120)
	segments := logSegments(t, l.name)
	if len(segments) < 3 {
		t.Fatalf("%d segments, want several", len(segments))
	}
	if err := os.Remove(segments[len(segments)-1]); err != nil {
		t.Fatal(err)
	}
	// verify and every write refuse the ledger, naming the log's damage.
	l.run("-o", "json", "verify").expect(t, exitStorage, `"code":"CORRUPT"`)
	l.run("verify").expect(t, exitStorage, "is missing")
	l.run("append", "acme/x", "--type", "t/v1", "--key", "order-999", "--data", "x").expect(t, exitStorage, ".wal")
	l.run("accept-log-loss").expect(t, exitUsage, "--confirm")

	var out acceptLogLossJSON
	if err := json.Unmarshal([]byte(l.must("-o", "json", "accept-log-loss", "--confirm")), &out); err != nil {
		t.Fatal(err)
	}
	if out.Damage == "" || out.KeptAs == "" || out.Replayed == 0 || out.Replayed >= 120 {
		t.Fatalf("accept-log-loss: %+v; want the commits before the missing segment replayed and the folder kept", out)
	}
	if _, err := os.Stat(out.KeptAs); err != nil {
		t.Fatalf("the log kept as %s: %v", out.KeptAs, err)
	}
	l.must("verify")
	head := l.must("-o", "json", "head", "acme/x")
	if !strings.Contains(head, fmt.Sprintf(`"seq":%d`, out.Replayed)) {
		t.Fatalf("head %s, want seq %d", head, out.Replayed)
	}
	// A clean ledger: nothing to accept, nothing moved.
	l.must("accept-log-loss", "--confirm")
}

func TestAcceptLogLossAfterTheLogFolderWasDeleted(t *testing.T) {
	t.Parallel()
	l := newFileLedger(t)
	l.must("init")
	l.must("append", "acme/x", "--type", "t/v1", "--key", "order-0", "--data", "paid 0")
	crashedLedger(t, l.name, 5)
	if err := os.RemoveAll(bolt.LogDirectory(l.name)); err != nil {
		t.Fatal(err)
	}
	l.run("-o", "json", "append", "acme/x", "--type", "t/v1", "--key", "order-1", "--data", "paid 1").
		expect(t, exitStorage, `"code":"CORRUPT"`)
	l.run("verify").expect(t, exitStorage, "not closed cleanly")
	out := l.must("accept-log-loss", "--confirm")
	if !strings.Contains(out, "no log folder") {
		t.Fatalf("accept-log-loss said %q", out)
	}
	l.must("verify")
}

// TestStrayFileInTheLogFolderWritesNothing: a file the log did not write in
// its folder refuses the ledger before anything is written (exit 5), so a
// retry without a key never adds an entry.
func TestStrayFileInTheLogFolderWritesNothing(t *testing.T) {
	t.Parallel()
	l := newFileLedger(t)
	l.must("init")
	l.must("append", "acme/c0", "--type", "t/v1", "--data", "x")
	dir := bolt.LogDirectory(l.name)
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "zzz.txt"), []byte("x\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		l.run("-o", "json", "append", "acme/c0", "--type", "t/v1", "--data", "x").expect(t, exitStorage, "zzz.txt")
	}
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	if head := l.must("-o", "json", "head", "acme/c0"); !strings.Contains(head, `"seq":1`) {
		t.Fatalf("head %s: the refused appends wrote", head)
	}
}

// TestSegmentOfAnotherLedgerIsCorrupt: a log segment copied in from another
// ledger is CORRUPT (exit 5), not STORAGE, and the log is left as it is.
func TestSegmentOfAnotherLedgerIsCorrupt(t *testing.T) {
	t.Parallel()
	l := newFileLedger(t)
	l.must("init")
	l.must("append", "acme/x", "--type", "t/v1", "--key", "order-0", "--data", "paid 0")
	crashedLedger(t, l.name, 3)
	other := filepath.Join(l.dir, "other.db")
	crashedLedger(t, other, 3)
	source := logSegments(t, other)[0]
	data, err := os.ReadFile(source)
	if err != nil {
		t.Fatal(err)
	}
	copied := filepath.Join(bolt.LogDirectory(l.name), filepath.Base(source))
	if _, err := os.Stat(copied); err == nil {
		t.Fatalf("%s exists: the copy would replace the ledger's own segment", copied)
	}
	if err := os.WriteFile(copied, data, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"verify"}, {"append", "acme/x", "--type", "t/v1", "--key", "order-1", "--data", "paid 1"}} {
		r := l.run(append([]string{"-o", "json"}, args...)...)
		r.expect(t, exitStorage, `"code":"CORRUPT"`)
		if !strings.Contains(r.stderr, "belongs to log") {
			t.Fatalf("%v: %s; want the two logs named", args, r.stderr)
		}
	}
	if after, err := os.ReadFile(copied); err != nil || string(after) != string(data) {
		t.Fatalf("the copied segment changed: %v", err)
	}
}
