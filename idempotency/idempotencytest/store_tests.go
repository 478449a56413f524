package idempotencytest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/ledgerworks/ledger/idempotency"
)

var storeTests = []struct {
	name string
	fn   func(t *testing.T, s idempotency.Store)
}{
	{"CreateIsAtomic", testCreateIsAtomic},
	{"CreateReturnsTheExistingRecord", testCreateReturnsExisting},
	{"FinishIsFenced", testFinishIsFenced},
	{"RetryCountSurvivesDeletion", testRetryCountSurvivesDeletion},
	{"ReleasePoisonsAtMaxRetries", testReleasePoisons},
	{"AbandonKeepsTheRetryCount", testAbandon},
	{"ExtendMovesTheLease", testExtend},
	{"ExpiredRecordCountsAsAbsent", testExpiredAbsent},
	{"RecoverStuckReleasesEndedLeasesOnly", testRecoverStuck},
	{"DeleteExpiredPurges", testDeleteExpired},
	{"CreateReplacesAnExpiredRecord", testCreateReplacesExpired},
	{"ListPages", testListPages},
	{"InvalidScopeRefused", testInvalidScope},
}

const (
	lease = time.Minute
	ttl   = time.Hour
)

func claim(scope idempotency.Scope, token string, now time.Time, hash byte) idempotency.Claim {
	return idempotency.Claim{Scope: scope, RequestHash: [32]byte{hash}, Token: token, Now: now,
		LeaseExpiresAt: now.Add(lease), ExpiresAt: now.Add(ttl)}
}

var scopeA = idempotency.Scope{Operation: "POST /payments", User: "alice", Key: "k-1"}

func mustCreate(t *testing.T, s idempotency.Store, c idempotency.Claim) idempotency.CreateResult {
	t.Helper()
	res, err := s.Create(context.Background(), c)
	if err != nil {
		t.Fatalf("Create(%v): %v", c.Scope, err)
	}
	return res
}

func testCreateIsAtomic(t *testing.T, s idempotency.Store) {
	now := NewClock().Now()
	const n = 32
	var created sync.Map
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := s.Create(context.Background(), claim(scopeA, fmt.Sprint("t", i), now, 1))
			if err != nil {
				errs <- err
				return
			}
			if res.Created {
				created.Store(i, true)
			} else if res.Record.Status != idempotency.StatusProcessing {
				errs <- fmt.Errorf("duplicate sees status %s", res.Record.Status)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	count := 0
	created.Range(func(any, any) bool { count++; return true })
	if count != 1 {
		t.Fatalf("%d concurrent creates returned Created, want exactly 1", count)
	}
}

func testCreateReturnsExisting(t *testing.T, s idempotency.Store) {
	now := NewClock().Now()
	res := mustCreate(t, s, claim(scopeA, "t1", now, 7))
	if !res.Created || res.Record.Attempt != 1 || res.Record.Status != idempotency.StatusProcessing {
		t.Fatalf("first create: %+v", res)
	}
	dup := mustCreate(t, s, claim(scopeA, "t2", now, 8))
	if dup.Created || dup.Record.Token != "t1" || dup.Record.RequestHash != [32]byte{7} {
		t.Fatalf("second create: %+v, want the first record", dup)
	}
	resp := idempotency.Response{Status: 201, Header: map[string][]string{"Content-Type": {"application/json"}}, Body: []byte(`{"id":1}`)}
	if err := s.Succeed(context.Background(), scopeA, "t1", resp, now.Add(ttl), now); err != nil {
		t.Fatal(err)
	}
	dup = mustCreate(t, s, claim(scopeA, "t3", now, 7))
	if dup.Created || dup.Record.Status != idempotency.StatusSuccess || dup.Record.Response == nil ||
		dup.Record.Response.Status != 201 || string(dup.Record.Response.Body) != `{"id":1}` ||
		dup.Record.Response.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("after success: %+v", dup)
	}
	got, err := s.Get(context.Background(), scopeA, now)
	if err != nil || got.Status != idempotency.StatusSuccess {
		t.Fatalf("Get: %+v, %v", got, err)
	}
	if _, err := s.Get(context.Background(), idempotency.Scope{Operation: "x", User: "y", Key: "z"}, now); !errors.Is(err, idempotency.ErrNotFound) {
		t.Fatalf("Get of an unknown scope: %v, want ErrNotFound", err)
	}
}

func testFinishIsFenced(t *testing.T, s idempotency.Store) {
	ctx := context.Background()
	now := NewClock().Now()
	mustCreate(t, s, claim(scopeA, "t1", now, 1))
	resp := idempotency.Response{Status: 200, Body: []byte("ok")}
	if err := s.Succeed(ctx, scopeA, "stale", resp, now.Add(ttl), now); !errors.Is(err, idempotency.ErrLeaseLost) {
		t.Fatalf("Succeed with a stale token: %v, want ErrLeaseLost", err)
	}
	if err := s.Succeed(ctx, scopeA, "t1", resp, now.Add(ttl), now); err != nil {
		t.Fatal(err)
	}
	if err := s.Fail(ctx, scopeA, "t1", "late", now.Add(ttl), now); !errors.Is(err, idempotency.ErrLeaseLost) {
		t.Fatalf("Fail after Succeed: %v, want ErrLeaseLost", err)
	}
	if _, err := s.Release(ctx, scopeA, "t1", 3, now.Add(ttl), now); !errors.Is(err, idempotency.ErrLeaseLost) {
		t.Fatalf("Release after Succeed: %v, want ErrLeaseLost", err)
	}
	if err := s.Extend(ctx, scopeA, "t1", now.Add(lease), now); !errors.Is(err, idempotency.ErrLeaseLost) {
		t.Fatalf("Extend after Succeed: %v, want ErrLeaseLost", err)
	}
	if err := s.Succeed(ctx, scopeA, "t1", idempotency.Response{Status: 500}, now.Add(ttl), now); !errors.Is(err, idempotency.ErrLeaseLost) {
		t.Fatalf("second Succeed: %v, want ErrLeaseLost", err)
	}
	got, err := s.Get(ctx, scopeA, now)
	if err != nil || got.Status != idempotency.StatusSuccess || got.Response.Status != 200 {
		t.Fatalf("record after stale calls: %+v, %v", got, err)
	}
}

func testRetryCountSurvivesDeletion(t *testing.T, s idempotency.Store) {
	ctx := context.Background()
	now := NewClock().Now()
	for i := 1; i <= 2; i++ {
		res := mustCreate(t, s, claim(scopeA, fmt.Sprint("t", i), now, 1))
		if !res.Created || res.Record.Attempt != i {
			t.Fatalf("create %d: %+v, want Created with attempt %d", i, res, i)
		}
		rr, err := s.Release(ctx, scopeA, fmt.Sprint("t", i), 3, now.Add(ttl), now)
		if err != nil || rr.Retries != i || rr.Poisoned {
			t.Fatalf("release %d: %+v, %v", i, rr, err)
		}
		if _, err := s.Get(ctx, scopeA, now); !errors.Is(err, idempotency.ErrNotFound) {
			t.Fatalf("record after release %d: %v, want ErrNotFound", i, err)
		}
	}
	res := mustCreate(t, s, claim(scopeA, "t3", now, 1))
	if !res.Created || res.Record.Attempt != 3 {
		t.Fatalf("third create: %+v, want attempt 3", res)
	}
}

func testReleasePoisons(t *testing.T, s idempotency.Store) {
	ctx := context.Background()
	now := NewClock().Now()
	for i := 1; i <= 3; i++ {
		mustCreate(t, s, claim(scopeA, fmt.Sprint("t", i), now, 1))
		rr, err := s.Release(ctx, scopeA, fmt.Sprint("t", i), 3, now.Add(ttl), now)
		if err != nil || rr.Poisoned != (i == 3) {
			t.Fatalf("release %d: %+v, %v", i, rr, err)
		}
	}
	res := mustCreate(t, s, claim(scopeA, "t4", now, 1))
	if res.Created || res.Record.Status != idempotency.StatusFailed {
		t.Fatalf("create after poisoning: %+v, want the FAILED record", res)
	}
}

// An outage's attempts never count: many abandons leave the key free, with
// the attempt number of the first retry that counted.
func testAbandon(t *testing.T, s idempotency.Store) {
	ctx := context.Background()
	now := NewClock().Now()
	mustCreate(t, s, claim(scopeA, "t0", now, 1))
	if _, err := s.Release(ctx, scopeA, "t0", 3, now.Add(ttl), now); err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= 5; i++ {
		tok := fmt.Sprint("t", i)
		res := mustCreate(t, s, claim(scopeA, tok, now, 1))
		if !res.Created || res.Record.Attempt != 2 {
			t.Fatalf("create %d after abandons: %+v, want a new attempt 2", i, res)
		}
		if err := s.Abandon(ctx, scopeA, "other", now); !errors.Is(err, idempotency.ErrLeaseLost) {
			t.Fatalf("Abandon with another token: %v", err)
		}
		if err := s.Abandon(ctx, scopeA, tok, now); err != nil {
			t.Fatalf("abandon %d: %v", i, err)
		}
		if err := s.Abandon(ctx, scopeA, tok, now); !errors.Is(err, idempotency.ErrLeaseLost) {
			t.Fatalf("a second Abandon: %v", err)
		}
	}
	mustCreate(t, s, claim(scopeA, "t9", now, 1))
	if err := s.Succeed(ctx, scopeA, "t9", idempotency.Response{Status: 201}, now.Add(ttl), now); err != nil {
		t.Fatal(err)
	}
	if err := s.Abandon(ctx, scopeA, "t9", now); !errors.Is(err, idempotency.ErrLeaseLost) {
		t.Fatalf("Abandon of a finished record: %v", err)
	}
	if rec, err := s.Get(ctx, scopeA, now); err != nil || rec.Status != idempotency.StatusSuccess {
		t.Fatalf("after an Abandon of a finished record: %+v, %v", rec, err)
	}
}

func testExtend(t *testing.T, s idempotency.Store) {
	ctx := context.Background()
	now := NewClock().Now()
	mustCreate(t, s, claim(scopeA, "t1", now, 1))
	if err := s.Extend(ctx, scopeA, "t1", now.Add(10*lease), now); err != nil {
		t.Fatal(err)
	}
	if err := s.Extend(ctx, scopeA, "other", now.Add(10*lease), now); !errors.Is(err, idempotency.ErrLeaseLost) {
		t.Fatalf("Extend with another token: %v", err)
	}
	n, err := s.RecoverStuck(ctx, now.Add(5*lease), 10, 3, now.Add(ttl), now)
	if err != nil || n != 0 {
		t.Fatalf("RecoverStuck of an extended lease: %d, %v, want 0", n, err)
	}
	n, err = s.RecoverStuck(ctx, now.Add(10*lease), 10, 3, now.Add(ttl), now)
	if err != nil || n != 1 {
		t.Fatalf("RecoverStuck after the extended lease: %d, %v, want 1", n, err)
	}
}

func testExpiredAbsent(t *testing.T, s idempotency.Store) {
	ctx := context.Background()
	now := NewClock().Now()
	mustCreate(t, s, claim(scopeA, "t1", now, 1))
	if err := s.Succeed(ctx, scopeA, "t1", idempotency.Response{Status: 200}, now.Add(ttl), now); err != nil {
		t.Fatal(err)
	}
	later := now.Add(ttl)
	if _, err := s.Get(ctx, scopeA, later); !errors.Is(err, idempotency.ErrNotFound) {
		t.Fatalf("Get of an expired record: %v, want ErrNotFound", err)
	}
	res := mustCreate(t, s, claim(scopeA, "t2", later, 2))
	if !res.Created || res.Record.Attempt != 1 {
		t.Fatalf("create over an expired record: %+v", res)
	}
}

func testRecoverStuck(t *testing.T, s idempotency.Store) {
	ctx := context.Background()
	now := NewClock().Now()
	old := idempotency.Scope{Operation: "op", User: "u", Key: "old"}
	live := idempotency.Scope{Operation: "op", User: "u", Key: "live"}
	mustCreate(t, s, claim(old, "t-old", now, 1))
	mustCreate(t, s, claim(live, "t-live", now.Add(lease), 1))
	n, err := s.RecoverStuck(ctx, now.Add(lease), 10, 3, now.Add(ttl), now.Add(lease))
	if err != nil || n != 1 {
		t.Fatalf("RecoverStuck: %d, %v, want 1", n, err)
	}
	if _, err := s.Get(ctx, old, now.Add(lease)); !errors.Is(err, idempotency.ErrNotFound) {
		t.Fatalf("the stuck record is still there: %v", err)
	}
	if r, err := s.Get(ctx, live, now.Add(lease)); err != nil || r.Status != idempotency.StatusProcessing {
		t.Fatalf("the live record: %+v, %v", r, err)
	}
	res := mustCreate(t, s, claim(old, "t-new", now.Add(lease), 1))
	if !res.Created || res.Record.Attempt != 2 {
		t.Fatalf("create after recovery: %+v, want attempt 2", res)
	}
	if err := s.Succeed(ctx, old, "t-old", idempotency.Response{Status: 200}, now.Add(ttl), now); !errors.Is(err, idempotency.ErrLeaseLost) {
		t.Fatalf("the recovered attempt finishing: %v, want ErrLeaseLost", err)
	}
}

func testDeleteExpired(t *testing.T, s idempotency.Store) {
	ctx := context.Background()
	now := NewClock().Now()
	for i := range 5 {
		sc := idempotency.Scope{Operation: "op", User: "u", Key: fmt.Sprint("k", i)}
		mustCreate(t, s, claim(sc, "t", now, 1))
		if err := s.Succeed(ctx, sc, "t", idempotency.Response{Status: 200}, now.Add(ttl), now); err != nil {
			t.Fatal(err)
		}
	}
	fresh := idempotency.Scope{Operation: "op", User: "u", Key: "fresh"}
	mustCreate(t, s, claim(fresh, "t", now.Add(ttl/2), 1))
	if err := s.Succeed(ctx, fresh, "t", idempotency.Response{Status: 200}, now.Add(2*ttl), now.Add(ttl/2)); err != nil {
		t.Fatal(err)
	}
	later := now.Add(ttl)
	n, err := s.DeleteExpired(ctx, later, 3)
	if err != nil || n != 3 {
		t.Fatalf("DeleteExpired(limit 3): %d, %v", n, err)
	}
	n, err = s.DeleteExpired(ctx, later, 100)
	if err != nil || n != 2 {
		t.Fatalf("second DeleteExpired: %d, %v, want 2", n, err)
	}
	recs, err := s.List(ctx, idempotency.Scope{}, "", 100, now) // as seen before expiry
	if err != nil || len(recs) != 1 || recs[0].Key != "fresh" {
		t.Fatalf("records left: %+v, %v, want only fresh", recs, err)
	}
}

// testCreateReplacesExpired checks that a record replaced by
// Create is gone: whether the new attempt is abandoned, released or left to
// expire, cleanup counts one record per scope, never the replaced one.
func testCreateReplacesExpired(t *testing.T, s idempotency.Store) {
	ctx := context.Background()
	now := NewClock().Now()
	later, last := now.Add(ttl), now.Add(2*ttl)
	scopes := make([]idempotency.Scope, 3)
	for i := range scopes {
		scopes[i] = idempotency.Scope{Operation: "op", User: "u", Key: fmt.Sprint("k", i)}
		mustCreate(t, s, claim(scopes[i], "t1", now, 1))
		if err := s.Succeed(ctx, scopes[i], "t1", idempotency.Response{Status: 200}, later, now); err != nil {
			t.Fatal(err)
		}
		if res := mustCreate(t, s, claim(scopes[i], "t2", later, 2)); !res.Created || res.Record.Attempt != 1 {
			t.Fatalf("create over an expired record: %+v", res)
		}
	}
	if err := s.Abandon(ctx, scopes[0], "t2", later); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Release(ctx, scopes[1], "t2", 3, last, later); err != nil {
		t.Fatal(err)
	}
	for _, sc := range scopes[:2] {
		if rec, err := s.Get(ctx, sc, later); !errors.Is(err, idempotency.ErrNotFound) {
			t.Fatalf("Get(%v) after its attempt ended: %+v, %v, want ErrNotFound", sc, rec, err)
		}
	}
	if n, err := s.DeleteExpired(ctx, later, 100); err != nil || n != 0 {
		t.Fatalf("DeleteExpired with no record expired: %d, %v, want 0", n, err)
	}
	// scopes[2]'s attempt is left to expire: one record, counted once
	// however the deletion is split.
	total := 0
	for range 3 {
		n, err := s.DeleteExpired(ctx, last, 1)
		if err != nil {
			t.Fatal(err)
		}
		total += n
	}
	if total != 1 {
		t.Fatalf("DeleteExpired(limit 1) three times deleted %d records, want 1", total)
	}
	recs, err := s.List(ctx, idempotency.Scope{}, "", 100, later)
	if err != nil || len(recs) != 0 {
		t.Fatalf("records left: %+v, %v, want none", recs, err)
	}
}

func testListPages(t *testing.T, s idempotency.Store) {
	ctx := context.Background()
	now := NewClock().Now()
	want := map[string]idempotency.Status{}
	for i := range 7 {
		sc := idempotency.Scope{Operation: "op", User: fmt.Sprint("u", i%2), Key: fmt.Sprint("k", i)}
		mustCreate(t, s, claim(sc, "t", now, 1))
		want[sc.User+"/"+sc.Key] = idempotency.StatusProcessing
		if i%3 == 0 {
			if err := s.Succeed(ctx, sc, "t", idempotency.Response{Status: 200}, now.Add(ttl), now); err != nil {
				t.Fatal(err)
			}
			want[sc.User+"/"+sc.Key] = idempotency.StatusSuccess
		}
	}
	got := map[string]idempotency.Status{}
	after := idempotency.Scope{}
	for {
		page, err := s.List(ctx, after, "", 3, now)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range page {
			if _, dup := got[r.User+"/"+r.Key]; dup {
				t.Fatalf("List returned %v twice", r.Scope)
			}
			got[r.User+"/"+r.Key] = r.Status
		}
		if len(page) < 3 {
			break
		}
		after = page[len(page)-1].Scope
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("List pages: %v, want %v", got, want)
	}
	succ, err := s.List(ctx, idempotency.Scope{}, idempotency.StatusSuccess, 100, now)
	if err != nil || len(succ) != 3 {
		t.Fatalf("List(SUCCESS): %d records, %v, want 3", len(succ), err)
	}
}

func testInvalidScope(t *testing.T, s idempotency.Store) {
	now := NewClock().Now()
	for _, sc := range []idempotency.Scope{{Operation: "op", User: "", Key: "k"}, {Operation: "op", User: "u", Key: "a\x00b"}, {Operation: "", User: "u", Key: "k"}} {
		if _, err := s.Create(context.Background(), claim(sc, "t", now, 1)); !errors.Is(err, idempotency.ErrInvalidScope) {
			t.Fatalf("Create(%q): %v, want ErrInvalidScope", sc, err)
		}
	}
}
