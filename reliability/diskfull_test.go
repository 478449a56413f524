package reliability

import (
	"bytes"
	"cmp"
	"context"
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
	"testing"

	"github.com/ledgerworks/ledger/chain"
	"github.com/ledgerworks/ledger/storage"
)

// Disk-full test parameters.
const (
	diskSize          = "8m"
	diskFillerBytes   = 2 << 20  // freed to make room again
	diskPayloadBytes  = 64 << 10 // per append while filling
	diskAppendsMax    = 1000     // more than the disk can hold
	diskRefusalsAfter = 5        // appends tried after the first refusal
	diskWriters       = 4        // goroutines appending at once
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

// TestDiskFull fills a ledger on a small disk until appends fail. The
// failure is a typed storage error (storage.ErrIO), further appends keep
// failing without writing anything, every acknowledged entry is still
// there and verifies in the open ledger and after reopening, and once space
// is freed appends succeed again. ledgerctl append on the full disk exits 5.
func TestDiskFull(t *testing.T) {
	t.Parallel()
	disk := mountSmallDisk(t)
	ctx := context.Background()
	filler := filepath.Join(disk, "filler")
	if err := os.WriteFile(filler, make([]byte, diskFillerBytes), 0o600); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(disk, "ledger.db")
	db := openFile(t, path)
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
	if !errors.Is(refusal, storage.ErrIO) {
		t.Errorf("a full disk gives %v; want an error matching storage.ErrIO", refusal)
	}
	if !strings.Contains(refusal.Error(), "no space left on device") {
		t.Errorf("a full disk gives %q; want it to say there is no space left", refusal)
	}
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
	if err := db.Close(); err != nil {
		t.Fatalf("close on a full disk: %v", err)
	}

	// ledgerctl append on the full disk: exit 5 with a message.
	big := filepath.Join(t.TempDir(), "payload")
	if err := os.WriteFile(big, bytes.Repeat([]byte("x"), chain.PayloadSizeMaxDefault), 0o600); err != nil {
		t.Fatal(err)
	}
	r := runLedgerctl(t, nil, "--db", path, "append", chainName, "--type", "raw/v1", "--key", "cli", "--data", "@"+big)
	assertNoPanic(t, "ledgerctl append on a full disk", r)
	if r.exitCode != 5 || !strings.Contains(r.stderr, "ledgerctl: ") || !strings.Contains(r.stderr, "no space left on device") {
		t.Errorf("ledgerctl append on a full disk: exit %d, stderr %q; want exit 5 and a message", r.exitCode, r.stderr)
	}
	jsonRun := runLedgerctl(t, nil, "--db", path, "-o", "json", "append", chainName, "--type", "raw/v1", "--key", "cli", "--data", "@"+big)
	if jsonRun.exitCode != 5 {
		t.Errorf("ledgerctl -o json append on a full disk: exit %d, want 5", jsonRun.exitCode)
	}
	t.Run("ledgerctl stderr holds only its own message", func(t *testing.T) {
		var body struct {
			Error struct{ Code, Message string }
		}
		if err := json.Unmarshal([]byte(jsonRun.stderr), &body); err != nil || body.Error.Code != "STORAGE" {
			t.Errorf("with -o json on a full disk, stderr is not one JSON error object with code STORAGE: %q", jsonRun.stderr)
		}
	})

	db = openFile(t, path)
	assertAcknowledged(t, db, chainName, acked)
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
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
	r = runLedgerctl(t, nil, "--db", path, "append", chainName, "--type", "raw/v1", "--key", "cli", "--data", "@"+big)
	if r.exitCode != 0 {
		t.Errorf("ledgerctl append after space was freed: exit %d, stderr %q", r.exitCode, r.stderr)
	}
	db = openFile(t, path)
	assertAcknowledged(t, db, chainName, acked)
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
