package chain_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"testing"

	"github.com/ledgerworks/ledger/chain"
)

// storedUnsafeEntries are entries as a ledger written before the rules for
// new names may hold them: names those rules refuse, hashed as Format v1
// says.
func storedUnsafeEntries() []chain.Entry {
	var entries []chain.Entry
	for i, name := range []string{"..", "/etc/passwd", "acme//x", "acme/\u202egpj.exe"} {
		e := chain.Entry{Chain: name, Seq: 1, PrevHash: chain.Genesis(name), TimeUnixNano: int64(1764000000000000000 + i),
			IdempotencyKey: "order-\u20661", Type: "t\u200f/v1", Payload: []byte("paid 100")}
		e.Hash = e.ComputeHash()
		entries = append(entries, e)
	}
	return entries
}

// TestStoredUnsafeNamesStillRead: entries whose names the rules for new
// names refuse, imported as an older ledger's export would be, still read,
// verify, export and import again; a new append with the same names is
// refused with ErrUnsafeName and writes nothing.
func TestStoredUnsafeNamesStillRead(t *testing.T) {
	forEachBackend(t, chain.Options{}, func(t *testing.T, db *chain.DB) {
		ctx := context.Background()
		stored := storedUnsafeEntries()
		if err := db.Update(ctx, func(tx *chain.Tx) error {
			for _, e := range stored {
				if err := tx.AppendEntry(e); err != nil {
					return err
				}
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		names := make([]string, len(stored))
		for i, e := range stored {
			names[i] = e.Chain
			got, err := db.Get(ctx, e.Chain, 1)
			if err != nil || got.Hash != e.Hash {
				t.Fatalf("Get %q: %+v %v", e.Chain, got, err)
			}
			if got, err := db.Lookup(ctx, e.Chain, e.IdempotencyKey); err != nil || got.Hash != e.Hash {
				t.Fatalf("Lookup %q: %v", e.Chain, err)
			}
			_, err = db.Append(ctx, chain.Request{Chain: e.Chain, IdempotencyKey: e.IdempotencyKey, Type: e.Type, Payload: e.Payload})
			if !errors.Is(err, chain.ErrUnsafeName) || !errors.Is(err, chain.ErrInvalid) {
				t.Fatalf("new append to %q: %v, want ErrUnsafeName", e.Chain, err)
			}
		}
		before := takeSnapshot(t, db)
		report := assertVerifies(t, db)
		if report.Entries != int64(len(stored)) {
			t.Fatalf("verified %d entries, want %d", report.Entries, len(stored))
		}
		var export bytes.Buffer
		if _, err := db.Export(ctx, &export, names, nil); err != nil {
			t.Fatal(err)
		}
		if report, err := chain.VerifyExport(ctx, bytes.NewReader(export.Bytes()), chain.VerifyOptions{}); err != nil || !report.OK() {
			t.Fatalf("the export does not verify: %+v %v", report, err)
		}
		copyDB, _ := openFile(t, chain.Options{})
		reader := chain.NewExportReader(bytes.NewReader(export.Bytes()))
		if err := copyDB.Update(ctx, func(tx *chain.Tx) error {
			for {
				e, err := reader.Next()
				if errors.Is(err, io.EOF) {
					return nil
				}
				if err != nil {
					return err
				}
				if err := tx.AppendEntry(e); err != nil {
					return err
				}
			}
		}); err != nil {
			t.Fatalf("re-import: %v", err)
		}
		assertUnchanged(t, copyDB, before)
		assertUnchanged(t, db, before)
	})
}
