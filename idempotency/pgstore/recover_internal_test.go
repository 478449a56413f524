package pgstore

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/ledgerworks/ledger/idempotency"
)

func stuckClaim(t *testing.T, s *Store, key string, now time.Time) idempotency.Claim {
	t.Helper()
	c := idempotency.Claim{Scope: idempotency.Scope{Operation: "op", User: "u", Key: key}, RequestHash: [32]byte{1},
		Token: "t-" + key, Now: now, LeaseExpiresAt: now.Add(10 * time.Second), ExpiresAt: now.Add(time.Hour)}
	if res, err := s.Create(context.Background(), c); err != nil || !res.Created {
		t.Fatalf("Create %s: %+v, %v", key, res, err)
	}
	return c
}

func (s *Store) watermark(t *testing.T) time.Time {
	t.Helper()
	var wm time.Time
	if err := s.pool.QueryRow(context.Background(), `SELECT leases_ended_by FROM `+s.recovery).Scan(&wm); err != nil {
		t.Fatal(err)
	}
	return wm.UTC()
}

// TestRecoveryWatermark: recovery releases the ended leases once, moves
// its watermark only over what it handled (up to the last lease found when
// it stopped at its limit), keeps a lease a heartbeat extended until that
// one ends, and waits for no other process: one that finds the watermark
// locked returns at once.
func TestRecoveryWatermark(t *testing.T) {
	ctx := context.Background()
	s := openInternal(t, 4)
	now := time.Date(2026, 12, 7, 9, 0, 0, 0, time.UTC)
	for _, k := range []string{"a", "b", "c"} {
		stuckClaim(t, s, k, now)
	}
	done := stuckClaim(t, s, "done", now)
	if err := s.Succeed(ctx, done.Scope, done.Token, idempotency.Response{Status: 200}, now.Add(time.Hour), now); err != nil {
		t.Fatal(err)
	}
	beat := stuckClaim(t, s, "beat", now)
	if err := s.Extend(ctx, beat.Scope, beat.Token, now.Add(time.Minute), now.Add(5*time.Second)); err != nil {
		t.Fatal(err)
	}
	at := now.Add(20 * time.Second)
	recoverAt := func(endedBy time.Time, limit, want int) {
		t.Helper()
		if n, err := s.RecoverStuck(ctx, endedBy, limit, 3, endedBy.Add(time.Hour), endedBy); err != nil || n != want {
			t.Fatalf("RecoverStuck(%v, %d): %d, %v, want %d", endedBy.Sub(now), limit, n, err, want)
		}
	}
	recoverAt(at, 2, 2)
	if wm := s.watermark(t); !wm.Equal(now.Add(10*time.Second - time.Microsecond)) {
		t.Fatalf("watermark after a run cut at its limit: %v, want just below the last lease found", wm.Sub(now))
	}
	recoverAt(at, 10, 1)
	if wm := s.watermark(t); !wm.Equal(at) {
		t.Fatalf("watermark after a whole run: %v, want %v", wm.Sub(now), at.Sub(now))
	}
	recoverAt(at, 10, 0)
	recoverAt(at.Add(-time.Second), 10, 0) // a bound behind the watermark: nothing to scan
	if wm := s.watermark(t); !wm.Equal(at) {
		t.Fatalf("the watermark moved back: %v", wm.Sub(now))
	}

	// Another process recovering holds the watermark: this one returns.
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, `SELECT 1 FROM `+s.recovery+` FOR UPDATE`); err != nil {
		t.Fatal(err)
	}
	recoverAt(now.Add(2*time.Minute), 10, 0)
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	recoverAt(now.Add(2*time.Minute), 10, 1) // the heartbeat's lease ended
	if rec, err := s.Get(ctx, done.Scope, now.Add(2*time.Minute)); err != nil || rec.Status != idempotency.StatusSuccess {
		t.Fatalf("the finished record: %+v, %v", rec, err)
	}
}

// TestRecoveryByManyProcesses: stores of several processes recovering the
// same table at once release every stuck record exactly once.
func TestRecoveryByManyProcesses(t *testing.T) {
	ctx := context.Background()
	first := openInternal(t, 4)
	stores := []*Store{first}
	for range 3 {
		s, err := Open(ctx, first.pool.Config().ConnString(), Options{Schema: first.schema, MaxConns: 4})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(s.Close)
		stores = append(stores, s)
	}
	now := time.Date(2026, 12, 7, 9, 0, 0, 0, time.UTC)
	const stuck = 300
	for i := range stuck {
		stuckClaim(t, first, fmt.Sprint("k", i), now.Add(time.Duration(i%7)*time.Millisecond))
	}
	var (
		mu    sync.Mutex
		total int
		wg    sync.WaitGroup
	)
	for _, s := range stores {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 40 {
				at := now.Add(10*time.Second + time.Duration(i)*time.Millisecond)
				n, err := s.RecoverStuck(ctx, at, 16, 3, at.Add(time.Hour), at)
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				total += n
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	// Whatever a run skipped while another held the watermark is left
	// for the next one.
	for {
		at := now.Add(time.Minute)
		n, err := first.RecoverStuck(ctx, at, 1000, 3, at.Add(time.Hour), at)
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			break
		}
		total += n
	}
	if total != stuck {
		t.Fatalf("%d records released, want %d", total, stuck)
	}
	var retried int
	if err := first.pool.QueryRow(ctx, `SELECT count(*) FROM `+first.retries+` WHERE retries = 1`).Scan(&retried); err != nil {
		t.Fatal(err)
	}
	if retried != stuck {
		t.Fatalf("%d retry counts at 1, want %d: a record released twice, or never", retried, stuck)
	}
}

// TestRecoveryScansOnlyNewLeases: a run reads the index entries of the
// leases that ended since the watermark, not those of the records finished
// before it, as PostgreSQL counts them (idx_tup_read of the lease index).
func TestRecoveryScansOnlyNewLeases(t *testing.T) {
	ctx := context.Background()
	s := openInternal(t, 1) // one session: its statistics are flushed on demand
	now := time.Date(2026, 12, 7, 9, 0, 0, 0, time.UTC)
	const finished = 3000
	if _, err := s.pool.Exec(ctx, `INSERT INTO `+s.records+` (operation, user_id, key, status, request_hash, token, attempt,
		response_status, response_headers, response_body, created_at, updated_at, lease_expires_at, expires_at, finished_expires_at)
		SELECT 'op', 'u', 'old-' || i, 'SUCCESS', '\x01', 't', 1, 201, '{}', 'body', $1, $1,
			$1::timestamptz + i * interval '1 millisecond', $1::timestamptz + interval '1 hour', $1::timestamptz + interval '1 hour'
		FROM generate_series(1, $2::int) AS i`, now.Add(-time.Minute), finished); err != nil {
		t.Fatal(err)
	}
	if n, err := s.RecoverStuck(ctx, now, 100, 3, now.Add(time.Hour), now); err != nil || n != 0 {
		t.Fatalf("first RecoverStuck: %d, %v", n, err)
	}
	const stuck = 5
	for i := range stuck {
		stuckClaim(t, s, fmt.Sprint("new-", i), now)
	}
	before := s.leaseIndexReads(t)
	at := now.Add(20 * time.Second)
	if n, err := s.RecoverStuck(ctx, at, 100, 3, at.Add(time.Hour), at); err != nil || n != stuck {
		t.Fatalf("RecoverStuck: %d, %v, want %d", n, err, stuck)
	}
	if read := s.leaseIndexReads(t) - before; read < stuck || read > 2*stuck {
		t.Fatalf("the run read %d entries of the lease index, want the %d leases that ended since the watermark (of %d rows)",
			read, stuck, finished+stuck)
	}
}

// leaseIndexReads returns idx_tup_read of the lease index, once the
// store's one session flushed its statistics: it does so when it goes idle
// after pg_stat_force_next_flush, before it reads the next statement.
func (s *Store) leaseIndexReads(t *testing.T) int64 {
	t.Helper()
	ctx := context.Background()
	if _, err := s.pool.Exec(ctx, `SELECT pg_stat_force_next_flush()`); err != nil {
		t.Fatal(err)
	}
	var reads int64
	if err := s.pool.QueryRow(ctx, `SELECT idx_tup_read FROM pg_stat_user_indexes WHERE indexrelid = $1::regclass`,
		pgx.Identifier{s.schema, "idempotency_records_lease"}.Sanitize()).Scan(&reads); err != nil {
		t.Fatal(err)
	}
	return reads
}
