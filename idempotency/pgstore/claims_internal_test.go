package pgstore

import (
	"context"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/ledgerworks/ledger/idempotency"
	"github.com/ledgerworks/ledger/storage/postgres/pgtest"
)

// TestClaimsSkipOnlyTheirFlush: Open's claims pool runs its sessions with
// synchronous_commit off, the pool of SUCCESS, FAILED and releases does
// not, and a claim made on the first conflicts at once on the second.
func TestClaimsSkipOnlyTheirFlush(t *testing.T) {
	ctx := context.Background()
	s := openInternal(t, 2)
	var claims, durable string
	if err := s.claims.QueryRow(ctx, "SHOW synchronous_commit").Scan(&claims); err != nil {
		t.Fatal(err)
	}
	if err := s.pool.QueryRow(ctx, "SHOW synchronous_commit").Scan(&durable); err != nil {
		t.Fatal(err)
	}
	if claims != "off" || durable == "off" {
		t.Fatalf("synchronous_commit: claims %q, durable %q; want off and not off", claims, durable)
	}
	checkClaims(t, s)
	// New's store (the caller's pool, the claim in a transaction of its
	// own) answers alike.
	checkClaims(t, New(s.pool, s.schema))
}

// checkClaims creates a claim, conflicts with it, and finishes it.
func checkClaims(t *testing.T, s *Store) {
	t.Helper()
	ctx := context.Background()
	now := time.Date(2026, 12, 7, 7, 0, 0, 123456789, time.FixedZone("x", 3600)) // nanoseconds PostgreSQL does not keep
	c := idempotency.Claim{Scope: idempotency.Scope{Operation: "POST /pay", User: "alice", Key: fmt.Sprint(s.claims != nil)}, Token: "t1",
		Now: now, LeaseExpiresAt: now.Add(time.Minute), ExpiresAt: now.Add(time.Hour), RequestHash: [32]byte{7}}
	res, err := s.Create(ctx, c)
	if err != nil || !res.Created {
		t.Fatalf("Create: %+v, %v", res, err)
	}
	// The created record, built from the claim and the returned attempt,
	// is the stored one.
	if stored, err := s.Get(ctx, c.Scope, now); err != nil || !reflect.DeepEqual(stored, res.Record) {
		t.Fatalf("Create answered %+v, the store holds %+v (%v)", res.Record, stored, err)
	}
	c.Token = "t2"
	res, err = s.Create(ctx, c)
	if err != nil || res.Created || res.Record.Token != "t1" || res.Record.Status != idempotency.StatusProcessing {
		t.Fatalf("second Create: %+v, %v; want the first attempt's PROCESSING record", res, err)
	}
	if err := s.Succeed(ctx, c.Scope, "t1", idempotency.Response{Status: 201, Body: []byte("{}")}, now.Add(time.Hour), now); err != nil {
		t.Fatal(err)
	}
	rec, err := s.Get(ctx, c.Scope, now)
	if err != nil || rec.Status != idempotency.StatusSuccess {
		t.Fatalf("Get: %+v, %v", rec, err)
	}
}

// openInternal opens a store on a new schema of the test database, closed
// when the test ends.
func openInternal(t *testing.T, connsMax int32) *Store {
	t.Helper()
	url := pgtest.URL(t)
	s, err := Open(context.Background(), url, Options{Schema: pgtest.NewSchema(t, url), Migrate: true, MaxConns: connsMax})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s
}
