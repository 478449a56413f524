package bolt_test

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/ledgerworks/ledger/chain"
	"github.com/ledgerworks/ledger/storage/bolt"
)

// TestVerifyAcrossFileAndMemory verifies a ledger whose chains are partly
// in the file and partly in a memory table (and a long chain, which verify
// splits among forks): no failure, every entry counted; then again after
// Close, from the file alone.
func TestVerifyAcrossFileAndMemory(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "ledger.db")
	backend, err := bolt.Open(path, bolt.Options{Log: bolt.LogOn, MemtableBytesMax: 1 << 30})
	if err != nil {
		t.Fatal(err)
	}
	db, err := chain.OpenBackend(backend, chain.Options{})
	if err != nil {
		t.Fatal(err)
	}
	appendBatch := func(ch string, from, to int) {
		t.Helper()
		err := db.Update(ctx, func(tx *chain.Tx) error {
			for i := from; i <= to; i++ {
				if _, err := tx.Append(chain.Request{Chain: ch, IdempotencyKey: fmt.Sprintf("k-%d", i), Type: "t/v1", Payload: []byte(fmt.Sprint(i))}); err != nil {
					return err
				}
			}
			return tx.StatePut([]byte("s/"+ch), []byte(fmt.Sprint(to)))
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	for i := 0; i < 20; i++ {
		appendBatch("long", 1000*i+1, 1000*i+1000)
		appendBatch(fmt.Sprintf("short-%d", i%3), 10*i+1, 10*i+10)
		if i == 9 {
			if err := bolt.Checkpoint(backend); err != nil { // the first half goes to the file
				t.Fatal(err)
			}
		}
	}
	want := int64(20*1000 + 20*10)
	report, err := db.Verify(ctx, chain.VerifyOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !report.OK() || report.Entries != want {
		t.Fatalf("verify across the file and memory: %d entries, failures %v; want %d and none", report.Entries, report.Failures, want)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	db, err = chain.Open(path, chain.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if report, err = db.Verify(ctx, chain.VerifyOptions{}); err != nil || !report.OK() || report.Entries != want {
		t.Fatalf("verify after Close: %d entries, failures %v, %v", report.Entries, report.Failures, err)
	}
}
