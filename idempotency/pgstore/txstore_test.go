package pgstore_test

import (
	"context"
	"errors"
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

	"github.com/jackc/pgx/v5"

	"github.com/ledgerworks/ledger/chain"
	"github.com/ledgerworks/ledger/idempotency"
	"github.com/ledgerworks/ledger/idempotency/idempotencytest"
	"github.com/ledgerworks/ledger/idempotency/pgstore"
	"github.com/ledgerworks/ledger/storage/postgres"
	"github.com/ledgerworks/ledger/storage/postgres/pgtest"
)

// txLedger is a ledger and the guard's tables on one PostgreSQL database,
// each in a schema of its own.
type txLedger struct {
	url, ledgerSchema, storeSchema string
}

func newTxLedger(t *testing.T) txLedger {
	t.Helper()
	url := pgtest.URL(t)
	l := txLedger{url: url, ledgerSchema: pgtest.NewSchema(t, url), storeSchema: pgtest.NewSchema(t, url)}
	if err := pgstore.Migrate(context.Background(), url, l.storeSchema); err != nil {
		t.Fatal(err)
	}
	return l
}

// open opens the ledger, the store bound to it and a guard, closed when
// the test ends.
func (l txLedger) open(t *testing.T) (*chain.DB, *pgstore.Store, *idempotency.Guard) {
	t.Helper()
	ctx := context.Background()
	b, err := postgres.Open(ctx, l.url, postgres.Options{Schema: l.ledgerSchema})
	if err != nil {
		t.Fatal(err)
	}
	db, err := chain.OpenBackend(b, chain.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	s, err := pgstore.Open(ctx, l.url, pgstore.Options{Schema: l.storeSchema, Ledger: db})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	g, err := idempotency.New(idempotency.Options{Store: s, User: func(*http.Request) (string, error) { return "alice", nil },
		LeaseDuration: crashLease, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	return db, s, g
}

// txHandler appends one entry keyed by the request's scope and commits
// the SUCCESS record with it (Context.Update). inTx, when set, runs in the
// transaction after the append; its error fails the request.
func txHandler(inTx func(ic *idempotency.Context) error) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ic := idempotency.FromContext(r.Context())
		body, _ := io.ReadAll(r.Body)
		resp, err := ic.Update(r.Context(), func(tx *chain.Tx) (idempotency.Response, error) {
			res, err := tx.Append(chain.Request{Chain: "acme/payments", IdempotencyKey: ic.LedgerKey("pay:"), Type: "payment/v1", Payload: body})
			if err != nil {
				return idempotency.Response{}, err
			}
			if inTx != nil {
				if err := inTx(ic); err != nil {
					return idempotency.Response{}, err
				}
			}
			return idempotency.Response{Status: 201, Body: fmt.Appendf(nil, `{"seq":%d}`, res.Entry.Seq)}, nil
		})
		if err != nil {
			ic.Fail(err)
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
		idempotency.WriteResponse(w, resp)
	})
}

func post(t *testing.T, url, key string) (int, string, http.Header) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(`{"amount":"7.00"}`))
	req.Header.Set("Idempotency-Key", key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), resp.Header
}

func payments(t *testing.T, db *chain.DB) uint64 {
	t.Helper()
	h, err := db.Head(context.Background(), "acme/payments")
	if errors.Is(err, chain.ErrNotFound) {
		return 0
	}
	if err != nil {
		t.Fatal(err)
	}
	return h.Seq
}

var txScope = idempotency.Scope{Operation: "POST /", User: "alice", Key: "tx-1"}

// The entry and the SUCCESS record commit together; a retry is replayed
// without running the handler.
func TestPostgresSucceedTxCommitsWithTheEntries(t *testing.T) {
	l := newTxLedger(t)
	db, s, g := l.open(t)
	runs := 0
	srv := httptest.NewServer(g.Middleware(txHandler(func(*idempotency.Context) error { runs++; return nil })))
	defer srv.Close()
	if st, body, _ := post(t, srv.URL, "tx-1"); st != 201 || body != `{"seq":1}` {
		t.Fatalf("first: %d %s", st, body)
	}
	rec, err := s.Get(context.Background(), txScope, time.Now())
	if err != nil || rec.Status != idempotency.StatusSuccess || string(rec.Response.Body) != `{"seq":1}` {
		t.Fatalf("record %+v, %v", rec, err)
	}
	st, body, h := post(t, srv.URL, "tx-1")
	if st != 201 || body != `{"seq":1}` || h.Get("Idempotent-Replayed") != "true" || runs != 1 {
		t.Fatalf("retry: %d %s replayed=%q, handler runs %d", st, body, h.Get("Idempotent-Replayed"), runs)
	}
	if n := payments(t, db); n != 1 {
		t.Fatalf("%d entries, want 1", n)
	}
}

// An attempt whose record another process took over (its fence lost)
// writes nothing: the entries roll back with the refused SUCCESS.
func TestPostgresSucceedTxLostFenceRollsBackTheEntries(t *testing.T) {
	l := newTxLedger(t)
	db, _, g := l.open(t)
	steal := func(*idempotency.Context) error {
		conn, err := pgtest.Connect(context.Background(), l.url)
		if err != nil {
			return err
		}
		defer conn.Close(context.Background())
		table := pgx.Identifier{l.storeSchema, "idempotency_records"}.Sanitize()
		_, err = conn.Exec(context.Background(), `UPDATE `+table+` SET token = 'another-attempt'`)
		return err
	}
	srv := httptest.NewServer(g.Middleware(txHandler(steal)))
	defer srv.Close()
	if st, body, _ := post(t, srv.URL, "tx-1"); st < 400 || !strings.Contains(body, idempotency.ErrLeaseLost.Error()) {
		t.Fatalf("an attempt that lost its fence: %d %s, want a refusal naming the lost lease", st, body)
	}
	if n := payments(t, db); n != 0 {
		t.Fatalf("%d entries written by an attempt that lost its fence", n)
	}
}

// A handler that fails after appending leaves neither the entry nor a
// SUCCESS record: the key is released and its retry runs once.
func TestPostgresSucceedTxFailedHandlerWritesNothing(t *testing.T) {
	l := newTxLedger(t)
	db, s, g := l.open(t)
	fail := true
	srv := httptest.NewServer(g.Middleware(txHandler(func(*idempotency.Context) error {
		if fail {
			return errors.New("the payment provider is down")
		}
		return nil
	})))
	defer srv.Close()
	if st, _, _ := post(t, srv.URL, "tx-1"); st != http.StatusServiceUnavailable {
		t.Fatalf("failed handler: %d", st)
	}
	if n := payments(t, db); n != 0 {
		t.Fatalf("%d entries after a failed handler", n)
	}
	if rec, err := s.Get(context.Background(), txScope, time.Now()); !errors.Is(err, idempotency.ErrNotFound) {
		t.Fatalf("record after a transient failure: %+v, %v; want it released", rec, err)
	}
	fail = false
	if st, body, _ := post(t, srv.URL, "tx-1"); st != 201 || body != `{"seq":1}` {
		t.Fatalf("retry: %d %s", st, body)
	}
}

func txCrashChild(t *testing.T, l txLedger, stage, dir string) {
	_, _, g := l.open(t)
	stop := func() {
		os.WriteFile(filepath.Join(dir, "stopped"), nil, 0o600)
		select {}
	}
	var h http.Handler
	switch stage {
	case "in-transaction": // the entry appended, nothing committed
		h = txHandler(func(*idempotency.Context) error { stop(); return nil })
	case "after-commit": // entry and SUCCESS committed, no answer sent
		inner := txHandler(nil)
		h = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			inner.ServeHTTP(httptest.NewRecorder(), r)
			stop()
		})
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(dir, "addr.tmp"), []byte(ln.Addr().String()), 0o600)
	os.Rename(filepath.Join(dir, "addr.tmp"), filepath.Join(dir, "addr"))
	http.Serve(ln, g.Middleware(h))
}

// TestPostgresSucceedTxCrash kills (SIGKILL) a server inside the ledger
// transaction that carries the SUCCESS record, and right after its commit.
// The ledger and the guard never disagree: inside, neither the entry nor
// SUCCESS is there (the PROCESSING row is recovered and the retry runs
// once); after, both are, and the retry is replayed.
func TestPostgresSucceedTxCrash(t *testing.T) {
	if dir := os.Getenv("PGSTORE_TXCRASH_DIR"); dir != "" {
		l := txLedger{url: pgtest.URL(t), ledgerSchema: os.Getenv("PGSTORE_TXCRASH_LEDGER"), storeSchema: os.Getenv("PGSTORE_TXCRASH_STORE")}
		txCrashChild(t, l, os.Getenv("PGSTORE_TXCRASH_STAGE"), dir)
		return
	}
	for _, stage := range []string{"in-transaction", "after-commit"} {
		t.Run(stage, func(t *testing.T) {
			l := newTxLedger(t)
			dir := t.TempDir()
			cmd := exec.Command(os.Args[0], "-test.run=^TestPostgresSucceedTxCrash$")
			cmd.Env = append(os.Environ(), "PGSTORE_TXCRASH_DIR="+dir, "PGSTORE_TXCRASH_STAGE="+stage,
				"PGSTORE_TXCRASH_LEDGER="+l.ledgerSchema, "PGSTORE_TXCRASH_STORE="+l.storeSchema)
			cmd.Stderr = os.Stderr
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			addr := string(idempotencytest.WaitFile(t, filepath.Join(dir, "addr")))
			go func() {
				req, _ := http.NewRequest(http.MethodPost, "http://"+addr+"/", strings.NewReader(`{"amount":"7.00"}`))
				req.Header.Set("Idempotency-Key", "tx-1")
				if resp, err := http.DefaultClient.Do(req); err == nil {
					resp.Body.Close()
				}
			}()
			idempotencytest.WaitFile(t, filepath.Join(dir, "stopped"))
			cmd.Process.Kill()
			cmd.Wait()

			db, s, g := l.open(t)
			rec, err := s.Get(context.Background(), txScope, time.Now())
			if err != nil {
				t.Fatal(err)
			}
			entries := payments(t, db)
			switch {
			case stage == "in-transaction" && (entries != 0 || rec.Status != idempotency.StatusProcessing):
				t.Fatalf("killed inside the transaction: %d entries, record %s; want none and PROCESSING", entries, rec.Status)
			case stage == "after-commit" && (entries != 1 || rec.Status != idempotency.StatusSuccess):
				t.Fatalf("killed after the commit: %d entries, record %s; want 1 and SUCCESS", entries, rec.Status)
			}
			if rec.Status == idempotency.StatusProcessing {
				time.Sleep(time.Until(rec.LeaseExpiresAt))
				if n, err := g.Jobs().RecoverStuckRecords(context.Background(), 0, 10); err != nil || n != 1 {
					t.Fatalf("recovery: %d, %v, want 1", n, err)
				}
			}
			srv := httptest.NewServer(g.Middleware(txHandler(nil)))
			defer srv.Close()
			st, body, h := post(t, srv.URL, "tx-1")
			if st != 201 || body != `{"seq":1}` || (h.Get("Idempotent-Replayed") == "true") != (stage == "after-commit") {
				t.Fatalf("retry: %d %s replayed=%q", st, body, h.Get("Idempotent-Replayed"))
			}
			if n := payments(t, db); n != 1 {
				t.Fatalf("%d entries after the retry, want exactly 1", n)
			}
		})
	}
}
