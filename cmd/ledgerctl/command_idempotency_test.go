package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/ledgerworks/ledger/chain"
	"github.com/ledgerworks/ledger/idempotency"
	"github.com/ledgerworks/ledger/idempotency/pgstore"
)

// seedIdempotency writes, behind the CLI's back, a live SUCCESS record, an
// expired one and (on PostgreSQL, where PROCESSING records are stored) a
// dead worker's PROCESSING record whose lease has ended.
func seedIdempotency(t *testing.T, l *testLedger) {
	ctx := context.Background()
	var store idempotency.Store
	if l.backend == "postgres" {
		l.must("migrate")
		s, err := pgstore.Open(ctx, l.name, pgstore.Options{})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		store = s
	} else {
		db, err := chain.Open(l.name, chain.Options{})
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		s, err := idempotency.NewLedgerStore(db)
		if err != nil {
			t.Fatal(err)
		}
		store = s
	}
	now := time.Now()
	put := func(key string, at time.Time, finish bool) {
		sc := idempotency.Scope{Operation: "POST /payments", User: "alice", Key: key}
		if _, err := store.Create(ctx, idempotency.Claim{Scope: sc, Token: key, Now: at, LeaseExpiresAt: at.Add(time.Minute), ExpiresAt: at.Add(time.Hour)}); err != nil {
			t.Fatal(err)
		}
		if finish {
			if err := store.Succeed(ctx, sc, key, idempotency.Response{Status: 201, Body: []byte(`{"id":"` + key + `"}`)}, at.Add(time.Hour), at); err != nil {
				t.Fatal(err)
			}
		}
	}
	put("live", now, true)
	put("old", now.Add(-2*time.Hour), true)
	if l.backend == "postgres" {
		put("stuck", now.Add(-10*time.Minute), false)
	}
}

func TestIdempotencyCommands(t *testing.T) {
	for _, l := range testLedgers(t) {
		t.Run(l.backend, func(t *testing.T) {
			l.must("init")
			seedIdempotency(t, l)
			var list idempotencyListJSON
			if err := json.Unmarshal([]byte(l.must("-o", "json", "idempotency", "list")), &list); err != nil {
				t.Fatal(err)
			}
			recs := list.Records
			want := 1
			if l.backend == "postgres" {
				want = 2
			}
			if len(recs) != want || recs[0].Key != "live" || recs[0].Status != "SUCCESS" || recs[0].ResponseStatus != 201 {
				t.Fatalf("list: %+v", recs)
			}
			if out := l.must("idempotency", "list", "--status", "SUCCESS"); !strings.Contains(out, "SUCCESS") || strings.Contains(out, "stuck") {
				t.Fatalf("list --status SUCCESS: %q", out)
			}
			var shown idempotencyRecordJSON
			if err := json.Unmarshal([]byte(l.must("-o", "json", "idempotency", "show", "POST /payments", "alice", "live")), &shown); err != nil {
				t.Fatal(err)
			}
			if shown.ResponseBody == nil || *shown.ResponseBody != `{"id":"live"}` {
				t.Fatalf("show: %+v", shown)
			}
			l.run("idempotency", "show", "POST /payments", "bob", "live").expect(t, exitNotFound, "not found")
			l.run("idempotency", "show", "POST /payments", "bob", "").expect(t, exitUsage, "invalid scope")
			l.run("idempotency", "list", "--status", "DONE").expect(t, exitUsage, "--status")

			if out := l.must("idempotency", "cleanup"); out != "deleted 1 expired records\n" {
				t.Fatalf("cleanup: %q", out)
			}
			recovered := "recovered 0 stuck records\n" // a file's leases live in its server's memory
			if l.backend == "postgres" {
				recovered = "recovered 1 stuck records\n"
			}
			if out := l.must("idempotency", "recover"); out != recovered {
				t.Fatalf("recover: %q, want %q", out, recovered)
			}
			list = idempotencyListJSON{}
			if err := json.Unmarshal([]byte(l.must("-o", "json", "idempotency", "list")), &list); err != nil || len(list.Records) != 1 {
				t.Fatalf("list after cleanup and recover: %+v, %v", list, err)
			}
		})
	}
}
