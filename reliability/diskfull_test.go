package reliability

import (
	"bytes"
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/ledgerworks/ledger/chain"
	"github.com/ledgerworks/ledger/storage"
	"github.com/ledgerworks/ledger/storage/bolt"
)

// Disk-full test parameters.
const (
	diskSize          = "16m"
	diskFillerBytes   = 10 << 20  // freed to make room again
	diskPayloadBytes  = 64 << 10  // per append while filling
	diskAppendsMax    = 1000      // more than the disk can hold
	diskRefusalsAfter = 5         // appends tried after the first refusal
	diskWriters       = 4         // goroutines appending at once
	diskMemtableBytes = 256 << 10 // memory table of the LogOnCheckpoints subtest
)

// mountSmallDisk mounts a tmpfs of diskSize at a temporary folder and
// unmounts it at cleanup. It skips the test unless it runs as root and the
// mount works.
func mountSmallDisk(t *testing.T) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("disk-full test needs root to mount a small tmpfs (CI runs as root)")
	}
	folder := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size="+diskSize, "tmpfs", folder).CombinedOutput(); err != nil {
		t.Skipf("disk-full test cannot mount a tmpfs: %v: %s", err, bytes.TrimSpace(out))
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", folder).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v: %s", folder, err, out)
		}
	})
	return folder
}

// diskPayload is the payload of append n while filling: distinct per n.
func diskPayload(n int) []byte {
	return bytes.Repeat([]byte(fmt.Sprintf("%08d", n)), diskPayloadBytes/8)
}

// openDiskLedger opens the ledger at path through the bolt backend with the
// given commit mode.
func openDiskLedger(t *testing.T, path string, opts bolt.Options) (*chain.DB, error) {
	t.Helper()
	backend, err := bolt.Open(path, opts)
	if err != nil {
		return nil, err
	}
	db, err := chain.OpenBackend(backend, chain.Options{Clock: testClock()})
	if err != nil {
		backend.Close()
		return nil, err
	}
	return db, nil
}

func mustOpenDiskLedger(t *testing.T, path string, opts bolt.Options) *chain.DB {
	t.Helper()
	db, err := openDiskLedger(t, path, opts)
	if err != nil {
		t.Fatalf("open %s: %v", path, err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// fillDisk writes path until the disk it is on has no space left.
func fillDisk(t *testing.T, path string) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	chunk := make([]byte, 64<<10)
	for {
		_, err := f.Write(chunk)
		if errors.Is(err, syscall.ENOSPC) {
			return
		}
		if err != nil {
			t.Fatal(err)
		}
	}
}

// assertNoSpace checks that err is a refusal for lack of space.
func assertNoSpace(t *testing.T, what string, err error) {
	t.Helper()
	if err == nil || !errors.Is(err, storage.ErrIO) || !strings.Contains(err.Error(), "no space left on device") {
		t.Fatalf("%s: %v; want storage.ErrIO saying there is no space left", what, err)
	}
}

// TestDiskFull fills a ledger on a small disk until appends fail, with each
// commit mode of the bolt backend. The failure is a typed storage error
// (storage.ErrIO) naming the lack of space, further appends keep failing
// without writing anything, every acknowledged entry is still there and
// verifies in the open ledger, through a read-only open and after space is
// freed, and then appends succeed again. ledgerctl append (the default
// mode) on the full disk exits 5.
//
// Without the log a refused commit is refused by bbolt; Close and a
// writable open need no space. With the log the log refuses the commit
// when it cannot create its next segment, and takes commits again in the
// same process once there is room; Close on a disk too full for the final
// checkpoint keeps the log and says so, a writable open then refuses with
// storage.ErrIO (the checkpoint of the recovered log does not fit) and
// leaves the file and the log as they were, and a read-only open reads
// everything from the file and the log. With small memory tables
// (LogOnCheckpoints) checkpoints run while the disk fills and the refusal
// may come from one, which stops the handle until the ledger is reopened.
func TestDiskFull(t *testing.T) {
	t.Parallel()
	for _, mode := range []struct {
		name string
		opts bolt.Options
	}{
		{"LogOff", bolt.Options{Log: bolt.LogOff}},
		{"LogOn", bolt.Options{Log: bolt.LogOn}},
		// Small memory tables: checkpoints run while the disk fills, so the
		// refusal may come from a checkpoint, which stops the handle.
		{"LogOnCheckpoints", bolt.Options{Log: bolt.LogOn, MemtableBytesMax: diskMemtableBytes, LogSegmentSizeBytes: 1 << 20}},
	} {
		t.Run(mode.name, func(t *testing.T) {
			t.Parallel()
			testDiskFull(t, mode.opts)
		})
	}
}

func testDiskFull(t *testing.T, opts bolt.Options) {
	disk := mountSmallDisk(t)
	ctx := context.Background()
	filler := filepath.Join(disk, "filler")
	if err := os.WriteFile(filler, make([]byte, diskFillerBytes), 0o600); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(disk, "ledger.db")
	db := mustOpenDiskLedger(t, path, opts)
	chainName, err := chain.ScopedName("acme", "raw", "disk")
	if err != nil {
		t.Fatal(err)
	}
	// Several writers fill the disk together, so that the appends that
	// meet the full disk share group commits: each caller's answer must
	// still be the truth about its own entry.
	var (
		mutex   sync.Mutex
		acked   []chain.Entry
		refusal error
		next    int
		wg      sync.WaitGroup
	)
	for range diskWriters {
		wg.Go(func() {
			for {
				mutex.Lock()
				if refusal != nil || next >= diskAppendsMax {
					mutex.Unlock()
					return
				}
				n := next
				next++
				mutex.Unlock()
				res, err := db.Append(ctx, chain.Request{Chain: chainName, IdempotencyKey: "fill-" + strconv.Itoa(n),
					Type: "raw/v1", Payload: diskPayload(n)})
				mutex.Lock()
				if err != nil {
					if refusal == nil {
						refusal = err
					}
					if !errors.Is(err, storage.ErrIO) {
						t.Errorf("append %d on a full disk: %v; want storage.ErrIO", n, err)
					}
				} else {
					acked = append(acked, res.Entry)
				}
				mutex.Unlock()
			}
		})
	}
	wg.Wait()
	slices.SortFunc(acked, func(a, b chain.Entry) int { return cmp.Compare(a.Seq, b.Seq) })
	if refusal == nil {
		t.Fatalf("%d appends of %d bytes fit on a %s disk", diskAppendsMax, diskPayloadBytes, diskSize)
	}
	if len(acked) == 0 {
		t.Fatalf("the first append failed: %v", refusal)
	}
	t.Logf("disk full after %d acknowledged appends of %d bytes: %v", len(acked), diskPayloadBytes, refusal)
	assertNoSpace(t, "the first refusal", refusal)
	// Pages of a refused commit were written before the refusal, so the
	// file's free pages may hold a later append of the same size: keep
	// appending until diskRefusalsAfter appends in a row are refused.
	ackedBefore, refused := len(acked), 0
	for n, refusedInARow := diskAppendsMax, 0; refusedInARow < diskRefusalsAfter; n++ {
		res, err := db.Append(ctx, chain.Request{Chain: chainName, IdempotencyKey: "fill-" + strconv.Itoa(n),
			Type: "raw/v1", Payload: diskPayload(n)})
		switch {
		case err == nil:
			acked = append(acked, res.Entry)
			refusedInARow = 0
		case errors.Is(err, storage.ErrIO):
			refusedInARow++
			refused++
		default:
			t.Fatalf("append %d on a full disk: %v; want storage.ErrIO", n, err)
		}
		if n > 2*diskAppendsMax {
			t.Fatal("appends keep succeeding on a full disk")
		}
		next = n + 1
	}
	t.Logf("after the first refusal %d appends fitted and %d were refused", len(acked)-ackedBefore, refused)
	// A multi-chain Update on the full disk is refused whole and changes
	// nothing; should it fit after all, it is whole.
	before := takeSnapshot(t, db)
	other := mustChain(chain.ScopedName("acme", "raw", "disk-other"))
	var updated []chain.Entry
	err = db.Update(ctx, func(tx *chain.Tx) error {
		updated = updated[:0]
		for _, c := range []string{chainName, other} {
			res, err := tx.Append(chain.Request{Chain: c, IdempotencyKey: "update", Type: "raw/v1",
				Payload: bytes.Repeat(diskPayload(-1), 4)})
			if err != nil {
				return err
			}
			updated = append(updated, res.Entry)
		}
		return tx.StatePut([]byte("raw/acme/disk"), bytes.Repeat(diskPayload(-2), 4))
	})
	switch {
	case errors.Is(err, storage.ErrIO):
		if d := diffSnapshots(before, takeSnapshot(t, db)); d != "" {
			t.Errorf("a refused Update changed the ledger: %s", d)
		}
	case err == nil:
		t.Logf("the multi-chain Update fitted into pages that refused commits had written")
		acked = append(acked, updated[0])
		if h, err := db.Head(ctx, other); err != nil || h.Hash != updated[1].Hash {
			t.Errorf("acknowledged Update: the other chain's head is %v (%v)", h, err)
		}
	default:
		t.Errorf("multi-chain Update on a full disk: %v; want storage.ErrIO", err)
	}
	assertAcknowledged(t, db, chainName, acked)
	// A refused append wrote nothing: its key is free and the head is the
	// last acknowledged entry.
	for n := range next {
		key := "fill-" + strconv.Itoa(n)
		if !slices.ContainsFunc(acked, func(e chain.Entry) bool { return e.IdempotencyKey == key }) {
			if _, err := db.Lookup(ctx, chainName, key); !errors.Is(err, chain.ErrNotFound) {
				t.Errorf("refused append %s: lookup gives %v; want ErrNotFound (a refusal writes nothing)", key, err)
			}
		}
	}
	logDirectory := bolt.LogDirectory(path)
	var fillers []string
	checkpoints := opts.MemtableBytesMax != 0
	if opts.Log == bolt.LogOn {
		// The log refused a new segment and nothing else: once there is
		// room, the same handle takes commits again. A failed checkpoint
		// stops the handle until the ledger is reopened.
		if err := os.Remove(filler); err != nil {
			t.Fatal(err)
		}
		n := len(acked)
		res, err := db.Append(ctx, chain.Request{Chain: chainName, IdempotencyKey: "freed-" + strconv.Itoa(n),
			Type: "raw/v1", Payload: diskPayload(n)})
		switch {
		case err == nil:
			acked = append(acked, res.Entry)
		case checkpoints && errors.Is(err, storage.ErrIO):
			t.Logf("a failed checkpoint stopped the handle: %v", err)
		default:
			t.Fatalf("append once space was freed, same handle: %v", err)
		}
		// Now no room at all, not even for the final checkpoint.
		filler = filepath.Join(disk, "filler-rest")
		fillDisk(t, filler)
		err = db.Close()
		assertNoSpace(t, "close on a disk too full for the checkpoint", err)
		if !strings.Contains(err.Error(), "is kept") {
			t.Errorf("close on a full disk: %q; want it to say the log is kept", err)
		}
		if _, err := os.Stat(logDirectory); err != nil {
			t.Fatalf("the log after a refused final checkpoint: %v", err)
		}
		// A writable open must checkpoint the log first, which does not
		// fit: refused, the file and the log unchanged.
		fileBefore, logBefore := metaDigest(t, path), directoryDigest(t, logDirectory)
		reopened, err := openDiskLedger(t, path, opts)
		switch {
		case err == nil && checkpoints:
			// What the log held past the file fitted into pages earlier
			// checkpoints had freed in the file.
			t.Logf("the writable open's checkpoint fitted into the file's free pages")
			assertAcknowledged(t, reopened, chainName, acked)
			if err := reopened.Close(); err != nil {
				t.Fatal(err)
			}
		case err == nil:
			reopened.Close()
			t.Fatal("a writable open on a disk too full for its checkpoint succeeded")
		default:
			assertNoSpace(t, "writable open on a disk too full for its checkpoint", err)
			// A checkpoint of several commits is two bbolt transactions:
			// after checkpoints freed pages in the file the first may fit.
			if !checkpoints && metaDigest(t, path) != fileBefore {
				t.Fatal("a refused writable open changed the file's meta pages")
			}
			if directoryDigest(t, logDirectory) != logBefore {
				t.Fatal("a refused writable open changed the log")
			}
		}
	} else {
		if err := db.Close(); err != nil {
			t.Fatalf("close on a full disk: %v", err)
		}
	}
	fillers = append(fillers, filler)

	// ledgerctl append (the default mode) on the full disk: exit 5 with a
	// message. Not after checkpoints ran: a writable open's checkpoint may
	// fit into pages they freed in the file and release log segments, and
	// the disk is then no longer full.
	big := filepath.Join(t.TempDir(), "payload")
	if err := os.WriteFile(big, bytes.Repeat([]byte("x"), chain.PayloadSizeMaxDefault), 0o600); err != nil {
		t.Fatal(err)
	}
	if !checkpoints {
		assertLedgerctlRefusesForSpace(t, path, chainName, big)
	}

	// A read-only open on the full disk reads every acknowledged entry
	// (with the log on, from the file and the log).
	readOnly := mustOpenDiskLedger(t, path, bolt.Options{ReadOnly: true})
	switch cli, err := readOnly.Lookup(ctx, chainName, "cli"); {
	case err == nil:
		t.Errorf("ledgerctl append refused on a full disk wrote entry seq %d", cli.Seq)
	case !errors.Is(err, chain.ErrNotFound):
		t.Fatalf("lookup of ledgerctl's key: %v", err)
	}
	assertAcknowledged(t, readOnly, chainName, acked)
	if err := readOnly.Close(); err != nil {
		t.Fatal(err)
	}

	for _, f := range fillers {
		if err := os.Remove(f); err != nil {
			t.Fatal(err)
		}
	}
	db = mustOpenDiskLedger(t, path, opts)
	assertAcknowledged(t, db, chainName, acked)
	for i := range 3 {
		n := len(acked)
		res, err := db.Append(ctx, chain.Request{Chain: chainName, IdempotencyKey: "after-" + strconv.Itoa(n),
			Type: "raw/v1", Payload: diskPayload(n)})
		if err != nil {
			t.Fatalf("append %d after space was freed: %v", i, err)
		}
		if res.Entry.Seq != uint64(n+1) {
			t.Fatalf("append after space was freed got seq %d, want %d", res.Entry.Seq, n+1)
		}
		acked = append(acked, res.Entry)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(logDirectory); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the log after a clean close: %v; want it removed", err)
	}
	r := runLedgerctl(t, nil, "--db", path, "append", chainName, "--type", "raw/v1", "--key", "cli", "--data", "@"+big)
	if r.exitCode != 0 {
		t.Errorf("ledgerctl append after space was freed: exit %d, stderr %q", r.exitCode, r.stderr)
	}
	db = mustOpenDiskLedger(t, path, opts)
	assertAcknowledged(t, db, chainName, acked)
}

// assertLedgerctlRefusesForSpace runs ledgerctl append on a full disk: exit
// 5, a message naming the lack of space, and with -o json one error object
// with code STORAGE.
func assertLedgerctlRefusesForSpace(t *testing.T, path, chainName, payloadFile string) {
	t.Helper()
	r := runLedgerctl(t, nil, "--db", path, "append", chainName, "--type", "raw/v1", "--key", "cli", "--data", "@"+payloadFile)
	assertNoPanic(t, "ledgerctl append on a full disk", r)
	if r.exitCode != 5 || !strings.Contains(r.stderr, "ledgerctl: ") || !strings.Contains(r.stderr, "no space left on device") {
		t.Errorf("ledgerctl append on a full disk: exit %d, stderr %q; want exit 5 and a message", r.exitCode, r.stderr)
	}
	jsonRun := runLedgerctl(t, nil, "--db", path, "-o", "json", "append", chainName, "--type", "raw/v1", "--key", "cli", "--data", "@"+payloadFile)
	if jsonRun.exitCode != 5 {
		t.Errorf("ledgerctl -o json append on a full disk: exit %d, want 5", jsonRun.exitCode)
	}
	t.Run("ledgerctl stderr holds only its own message", func(t *testing.T) {
		var body struct {
			Error struct{ Code, Message string }
		}
		if err := json.Unmarshal([]byte(jsonRun.stderr), &body); err != nil || body.Error.Code != "STORAGE" ||
			!strings.Contains(body.Error.Message, "no space left on device") {
			t.Errorf("with -o json on a full disk, stderr is not one JSON error object with code STORAGE naming the lack of space: %q", jsonRun.stderr)
		}
	})
}

// fileDigest is the SHA-256 of the file at path, in hex.
func fileDigest(t *testing.T, path string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:])
}

// metaDigest is the SHA-256 of the two meta pages of the bbolt file at
// path, in hex: a refused commit may have written free pages, never a meta
// page, so equal meta pages mean the file holds what it held.
func metaDigest(t *testing.T, path string) string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	meta := make([]byte, 2*os.Getpagesize())
	if _, err := f.ReadAt(meta, 0); err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(meta)
	return hex.EncodeToString(sum[:])
}

// directoryDigest is the names and file digests of a directory, in order.
func directoryDigest(t *testing.T, dir string) string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for _, entry := range entries {
		fmt.Fprintf(&b, "%s=%s;", entry.Name(), fileDigest(t, filepath.Join(dir, entry.Name())))
	}
	return b.String()
}

// assertAcknowledged checks that the chain holds exactly the acknowledged
// entries, unchanged, and that the ledger verifies.
func assertAcknowledged(t *testing.T, db *chain.DB, chainName string, acked []chain.Entry) {
	t.Helper()
	ctx := context.Background()
	i := 0
	for e, err := range db.Entries(ctx, chainName, 1) {
		if err != nil {
			t.Fatalf("entries: %v", err)
		}
		if i >= len(acked) {
			if e.IdempotencyKey == "cli" { // appended by ledgerctl
				continue
			}
			t.Fatalf("entry seq %d was never acknowledged", e.Seq)
		}
		if e.Hash != acked[i].Hash || e.Seq != acked[i].Seq {
			t.Fatalf("entry seq %d differs from the acknowledged one", e.Seq)
		}
		i++
	}
	if i != len(acked) {
		t.Fatalf("%d of %d acknowledged entries are there", i, len(acked))
	}
	assertVerifies(t, db)
}
