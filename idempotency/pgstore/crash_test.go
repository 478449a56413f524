package pgstore_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
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
	"github.com/ledgerworks/ledger/idempotency/pgstore"
	"github.com/ledgerworks/ledger/storage/postgres/pgtest"
)

// crashLease outlasts the reopening after the kill, so that the first
// retry meets the dead attempt's lease still running; a retry after it
// ended would take the key over at once.
const crashLease = 5 * time.Second

// crashHandler appends one ledger entry keyed by the request's scope;
// stop, when set, is called before the append or after its commit.
func crashHandler(db *chain.DB, before, after func()) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ic := idempotency.FromContext(r.Context())
		body, _ := io.ReadAll(r.Body)
		if before != nil {
			before()
		}
		res, err := db.Append(r.Context(), chain.Request{Chain: "acme/payments", IdempotencyKey: ic.LedgerKey("pay:"), Type: "payment/v1", Payload: body})
		if err != nil {
			ic.Fail(err)
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
		if after != nil {
			after()
		}
		w.WriteHeader(201)
		fmt.Fprintf(w, `{"seq":%d}`, res.Entry.Seq)
	})
}

func crashGuard(t *testing.T, schema string) (*idempotency.Guard, *pgstore.Store) {
	s, err := pgstore.Open(context.Background(), pgtest.URL(t), pgstore.Options{Schema: schema})
	if err != nil {
		t.Fatal(err)
	}
	g, err := idempotency.New(idempotency.Options{Store: s, User: func(*http.Request) (string, error) { return "alice", nil },
		LeaseDuration: crashLease, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	return g, s
}

func crashChild(t *testing.T, dir, schema, stage string) {
	db, err := chain.Open(filepath.Join(dir, "ledger.db"), chain.Options{})
	if err != nil {
		t.Fatal(err)
	}
	g, _ := crashGuard(t, schema)
	stop := func() {
		os.WriteFile(filepath.Join(dir, "in-handler"), nil, 0o600)
		select {}
	}
	var before, after func()
	if stage == "before-append" {
		before = stop
	} else {
		after = stop
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(dir, "addr.tmp"), []byte(ln.Addr().String()), 0o600)
	os.Rename(filepath.Join(dir, "addr.tmp"), filepath.Join(dir, "addr"))
	http.Serve(ln, g.Middleware(crashHandler(db, before, after)))
}

// TestPostgresCrashMidHandler kills (SIGKILL) a server in the middle of a
// handler, before its ledger append and after it (before the SUCCESS
// record, which on PostgreSQL is a commit of its own): the PROCESSING row
// stays, recovery releases it once its lease has ended, and the retry runs
// the handler again, whose append the ledger answers with the first run's
// entry. The ledger ends with exactly one entry.
func TestPostgresCrashMidHandler(t *testing.T) {
	if dir := os.Getenv("PGSTORE_CRASH_DIR"); dir != "" {
		crashChild(t, dir, os.Getenv("PGSTORE_CRASH_SCHEMA"), os.Getenv("PGSTORE_CRASH_STAGE"))
		return
	}
	url := pgtest.URL(t)
	for _, stage := range []string{"before-append", "after-append"} {
		t.Run(stage, func(t *testing.T) {
			dir := t.TempDir()
			schema := pgtest.NewSchema(t, url)
			if err := pgstore.Migrate(context.Background(), url, schema); err != nil {
				t.Fatal(err)
			}
			cmd := exec.Command(os.Args[0], "-test.run=^TestPostgresCrashMidHandler$")
			cmd.Env = append(os.Environ(), "PGSTORE_CRASH_DIR="+dir, "PGSTORE_CRASH_SCHEMA="+schema, "PGSTORE_CRASH_STAGE="+stage)
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
			cmd.Process.Kill()
			cmd.Wait()

			db, err := chain.Open(filepath.Join(dir, "ledger.db"), chain.Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			g, store := crashGuard(t, schema)
			defer store.Close()
			scope := idempotency.Scope{Operation: "POST /", User: "alice", Key: "crash-1"}
			rec, err := store.Get(context.Background(), scope, time.Now())
			if err != nil || rec.Status != idempotency.StatusProcessing {
				t.Fatalf("after the crash: %+v, %v; want the dead attempt's PROCESSING record", rec, err)
			}
			srv := httptest.NewServer(g.Middleware(crashHandler(db, nil, nil)))
			defer srv.Close()
			retry := func() (int, string) {
				req, _ := http.NewRequest(http.MethodPost, srv.URL, strings.NewReader(`{"amount":"7.00"}`))
				req.Header.Set("Idempotency-Key", "crash-1")
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				defer resp.Body.Close()
				b, _ := io.ReadAll(resp.Body)
				return resp.StatusCode, string(b)
			}
			if st, _ := retry(); st != http.StatusConflict {
				t.Fatalf("retry while the dead attempt's lease runs: %d, want 409 in progress", st)
			}
			time.Sleep(time.Until(rec.LeaseExpiresAt))
			if n, err := g.Jobs().RecoverStuckRecords(context.Background(), 0, 10); err != nil || n != 1 {
				t.Fatalf("recovery: %d, %v, want 1", n, err)
			}
			if st, body := retry(); st != 201 || body != `{"seq":1}` {
				t.Fatalf("retry after recovery: %d %s", st, body)
			}
			h, err := db.Head(context.Background(), "acme/payments")
			if err != nil || h.Seq != 1 {
				t.Fatalf("ledger after the retry: %+v, %v; want exactly one entry", h, err)
			}
			rec, err = store.Get(context.Background(), scope, time.Now())
			if err != nil || rec.Status != idempotency.StatusSuccess || rec.Attempt != 2 {
				t.Fatalf("record after the retry: %+v, %v", rec, err)
			}
		})
	}
}
