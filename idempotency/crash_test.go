package idempotency_test

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ledgerworks/ledger/chain"
	"github.com/ledgerworks/ledger/idempotency"
	"github.com/ledgerworks/ledger/idempotency/idempotencytest"
)

// The crash test's child: a server on 127.0.0.1 whose handler stops for
// good at the stage it is told (inside the ledger transaction, or after
// it committed and before the response), for the parent to SIGKILL.
func crashChild(t *testing.T, dir, stage string) {
	db, err := chain.Open(filepath.Join(dir, "ledger.db"), chain.Options{})
	if err != nil {
		t.Fatal(err)
	}
	store, err := idempotency.NewLedgerStore(db)
	if err != nil {
		t.Fatal(err)
	}
	g, err := idempotency.New(idempotency.Options{Store: store, User: alice})
	if err != nil {
		t.Fatal(err)
	}
	stop := func() {
		os.WriteFile(filepath.Join(dir, "in-handler"), nil, 0o600)
		select {}
	}
	var hook func(*chain.Tx) error
	var after func()
	if stage == "in-transaction" {
		hook = func(*chain.Tx) error { stop(); return nil }
	} else {
		after = stop
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "addr.tmp"), []byte(ln.Addr().String()), 0o600); err != nil {
		t.Fatal(err)
	}
	os.Rename(filepath.Join(dir, "addr.tmp"), filepath.Join(dir, "addr"))
	http.Serve(ln, g.Middleware(paymentHandlerAfter(db, hook, after)))
}

// TestCrashMidHandler kills (SIGKILL) a server in the middle of a handler
// that appends an entry and commits its SUCCESS in the same transaction,
// reopens the ledger, recovers, and retries: the entry and the record are
// both there or both absent, and the retry ends with exactly one entry.
func TestCrashMidHandler(t *testing.T) {
	if dir := os.Getenv("IDEM_CRASH_DIR"); dir != "" {
		crashChild(t, dir, os.Getenv("IDEM_CRASH_STAGE"))
		return
	}
	for _, stage := range []string{"in-transaction", "after-commit"} {
		t.Run(stage, func(t *testing.T) {
			dir := t.TempDir()
			cmd := exec.Command(os.Args[0], "-test.run=^TestCrashMidHandler$")
			cmd.Env = append(os.Environ(), "IDEM_CRASH_DIR="+dir, "IDEM_CRASH_STAGE="+stage)
			cmd.Stderr = os.Stderr
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			addr := string(idempotencytest.WaitFile(t, filepath.Join(dir, "addr")))
			go func() {
				req, _ := http.NewRequest(http.MethodPost, "http://"+addr+"/", strings.NewReader(`{"amount":"7.00"}`))
				req.Header.Set("Idempotency-Key", "crash-1")
				if resp, err := http.DefaultClient.Do(req); err == nil {
					resp.Body.Close()
				}
			}()
			idempotencytest.WaitFile(t, filepath.Join(dir, "in-handler"))
			if err := cmd.Process.Kill(); err != nil {
				t.Fatal(err)
			}
			cmd.Wait()

			db, err := chain.Open(filepath.Join(dir, "ledger.db"), chain.Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			store := ledgerStore(t, db)
			scope := idempotency.Scope{Operation: "POST /", User: "alice", Key: "crash-1"}
			rec, recErr := store.Get(context.Background(), scope, time.Now())
			n := entries(t, db)
			committed := stage == "after-commit"
			if committed != (n == 1) || committed != (recErr == nil && rec.Status == idempotency.StatusSuccess) {
				t.Fatalf("after the crash: %d entries, record %+v (%v); want entry and SUCCESS together, committed=%v", n, rec, recErr, committed)
			}
			g, err := idempotency.New(idempotency.Options{Store: store, User: alice})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := g.Jobs().RecoverStuckRecords(context.Background(), 0, 100); err != nil {
				t.Fatal(err)
			}
			srv := httptest.NewServer(g.Middleware(paymentHandler(db, nil)))
			defer srv.Close()
			st, body, h := post(t, srv.URL, "crash-1", `{"amount":"7.00"}`)
			if st != 201 || body != `{"seq":1}` || (h.Get(idempotency.ReplayedHeader) == "true") != committed {
				t.Fatalf("retry after the crash: %d %s replayed=%q", st, body, h.Get(idempotency.ReplayedHeader))
			}
			if n := entries(t, db); n != 1 {
				t.Fatalf("%d entries after the retry, want 1", n)
			}
		})
	}
}
