package bolt_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	bbolt "go.etcd.io/bbolt"

	"github.com/ledgerworks/ledger/storage"
	"github.com/ledgerworks/ledger/storage/bolt"
)

const recoverChain = "recover/chain"

// recoverLedger writes n entries to one chain and returns the file's path and
// page size.
func recoverLedger(t *testing.T, n int) (string, int) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "l.db")
	b, err := bolt.Open(path, bolt.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	stx, err := b.Begin(ctx, true)
	if err != nil {
		t.Fatal(err)
	}
	for seq := uint64(1); seq <= uint64(n); seq++ {
		data := fmt.Appendf(nil, "entry-%06d-%s", seq, strings.Repeat("x", 64))
		var hash [storage.HashSize]byte
		binary.BigEndian.PutUint64(hash[:], seq)
		if err := stx.Append(ctx, recoverChain, storage.Record{Seq: seq, Data: data}, storage.Head{Seq: seq, Hash: hash}); err != nil {
			t.Fatal(err)
		}
	}
	if err := stx.Commit(); err != nil {
		t.Fatal(err)
	}
	pageSize := 0
	b.View(func(btx *bbolt.Tx) error { pageSize = btx.DB().Info().PageSize; return nil })
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	return path, pageSize
}

// damageLeafOf gives the page holding marker page flags no page type has.
func damageLeafOf(t *testing.T, path string, pageSize int, marker string) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	at := bytes.Index(data, []byte(marker))
	if at < 0 {
		t.Fatalf("%q not in the file", marker)
	}
	binary.LittleEndian.PutUint16(data[pageOf(t, data, pageSize, at)+8:], 0x4000)
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
}

// pageOf returns the offset of the page whose header covers byte at: a
// value larger than a page continues over overflow pages, which have no
// header, so it is the nearest page before at that names itself, is a leaf
// and overflows as far as at.
func pageOf(t *testing.T, data []byte, pageSize, at int) int {
	t.Helper()
	const leafPageFlag = 0x02
	target := at / pageSize
	for id := target; id >= 0; id-- {
		header := data[id*pageSize:]
		overflow := int(binary.LittleEndian.Uint32(header[12:]))
		if binary.LittleEndian.Uint64(header) == uint64(id) && binary.LittleEndian.Uint16(header[8:]) == leafPageFlag && id+overflow >= target {
			return id * pageSize
		}
	}
	t.Fatalf("no leaf page holds byte %d", at)
	return 0
}

// TestDamagedPageIsCorruptNotPanic: bbolt panics on a page with unknown
// flags; the backend turns that into storage.ErrCorrupt naming the file, in
// reads and in a writable open, and the file's lock is not kept.
func TestDamagedPageIsCorruptNotPanic(t *testing.T) {
	path, pageSize := recoverLedger(t, 2000)
	damageLeafOf(t, path, pageSize, "entry-001000-")
	ctx := context.Background()

	b, err := bolt.Open(path, bolt.Options{ReadOnly: true})
	if err != nil {
		t.Fatalf("read-only open: %v (the damaged page is not read by the open)", err)
	}
	if err := b.Check(); !errors.Is(err, storage.ErrCorrupt) {
		t.Fatalf("Check of the damaged file: %v; want storage.ErrCorrupt", err)
	}
	stx, err := b.Begin(ctx, false)
	if err != nil {
		t.Fatal(err)
	}
	var scanErr error
	read := 0
	for _, err := range stx.Entries(ctx, recoverChain, 1) {
		if err != nil {
			scanErr = err
			break
		}
		read++
	}
	if !errors.Is(scanErr, storage.ErrCorrupt) || !strings.Contains(scanErr.Error(), path) ||
		!strings.Contains(scanErr.Error(), "damaged page") {
		t.Fatalf("scan over the damaged page after %d records: %v; want storage.ErrCorrupt naming the file", read, scanErr)
	}
	if _, err := stx.Head(ctx, recoverChain); !errors.Is(err, storage.ErrCorrupt) {
		t.Errorf("Head after a recovered panic: %v; want the same corrupt error", err)
	}
	if err := stx.Rollback(); err != nil {
		t.Errorf("rollback: %v", err)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}

	if _, err := bolt.Open(path, bolt.Options{LockTimeout: -1}); !errors.Is(err, storage.ErrCorrupt) {
		t.Fatalf("writable open of the damaged file: %v; want storage.ErrCorrupt", err)
	}
	// The failed open released its lock: a reader gets in without waiting.
	again, err := bolt.Open(path, bolt.Options{ReadOnly: true, LockTimeout: -1})
	if err != nil {
		t.Fatalf("read-only open after the failed writable open: %v", err)
	}
	again.Close()
}

// TestLoopBodyPanicPassesThrough: a panic of the caller's own loop body is
// not taken for a damaged page; it reaches the caller unchanged and the
// transaction stays usable.
func TestLoopBodyPanicPassesThrough(t *testing.T) {
	path, _ := recoverLedger(t, 10)
	b, err := bolt.Open(path, bolt.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	ctx := context.Background()
	stx, err := b.Begin(ctx, false)
	if err != nil {
		t.Fatal(err)
	}
	defer stx.Rollback()
	type mine struct{ n int }
	got := func() (p any) {
		defer func() { p = recover() }()
		for rec, err := range stx.Entries(ctx, recoverChain, 1) {
			if err != nil {
				t.Fatal(err)
			}
			for kv, err := range stx.StateScan(ctx, nil, nil, false) {
				_, _ = kv, err
			}
			if rec.Seq == 3 {
				panic(mine{3})
			}
		}
		return nil
	}()
	if got != (mine{3}) {
		t.Fatalf("recovered %v; want the loop body's own panic value", got)
	}
	if h, err := stx.Head(ctx, recoverChain); err != nil || h.Seq != 10 {
		t.Fatalf("Head after the loop body's panic: %+v, %v; want seq 10", h, err)
	}
}
