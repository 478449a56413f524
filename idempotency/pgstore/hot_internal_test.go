package pgstore

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/ledgerworks/ledger/idempotency"
	"github.com/ledgerworks/ledger/storage/postgres/pgtest"
)

// entryResponse is a response the size of a raw append's on ledgerctl
// serve (a body of about 150 bytes, and its Content-Type).
func entryResponse(i int) idempotency.Response {
	body := fmt.Sprintf(`{"chain":"payments-%d","seq":%d,"hash":"%064x","time_unix_nano":1764000000000000000,"replayed":false}`, i%8, i, i)
	return idempotency.Response{Status: 201, Header: http.Header{"Content-Type": {"application/json"}}, Body: []byte(body)}
}

// TestFinishesAreHeapOnly: SUCCESS and FAILED records of concurrent
// requests are written as heap-only tuples (HOT), which insert nothing into
// any index: no index covers a column they change, and the table's pages
// keep room for them. Counted by PostgreSQL's own statistics.
func TestFinishesAreHeapOnly(t *testing.T) {
	ctx := context.Background()
	s := openInternal(t, 16)
	const workers, perWorker = 32, 40
	now := time.Now().UTC()
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range perWorker {
				n := w*perWorker + i
				c := idempotency.Claim{Scope: idempotency.Scope{Operation: "POST /v1/chains/{chain}/entries", User: "tenant-acme",
					Key: fmt.Sprintf("%08x-4f1e-4b7e-9c1d-%012x", n, n)}, RequestHash: [32]byte{byte(n)},
					Token: fmt.Sprintf("tok-%020d", n), Now: now, LeaseExpiresAt: now.Add(10 * time.Second), ExpiresAt: now.Add(time.Hour)}
				if res, err := s.Create(ctx, c); err != nil || !res.Created {
					errs <- fmt.Errorf("Create %d: %+v, %v", n, res, err)
					return
				}
				var err error
				if n%10 == 9 {
					err = s.Fail(ctx, c.Scope, c.Token, "declined", now.Add(time.Hour), now)
				} else {
					err = s.Succeed(ctx, c.Scope, c.Token, entryResponse(n), now.Add(time.Hour), now)
				}
				if err != nil {
					errs <- fmt.Errorf("finish %d: %v", n, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	s.Close() // the sessions' statistics are flushed when they end
	pool, err := pgxpool.New(ctx, pgtest.URL(t))
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	const total = workers * perWorker
	var upd, hot int64
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		err := pool.QueryRow(ctx, `SELECT n_tup_upd, n_tup_hot_upd FROM pg_stat_user_tables WHERE relid = $1::regclass`,
			s.records).Scan(&upd, &hot)
		if err != nil {
			t.Fatal(err)
		}
		if upd >= total || time.Now().After(deadline) {
			break
		}
	}
	var claimSize, finishedSize float64
	if err := pool.QueryRow(ctx, `SELECT avg(pg_column_size(r.*)) FILTER (WHERE status = 'SUCCESS'),
		avg(pg_column_size(r.*) - coalesce(pg_column_size(response_body), 0) - coalesce(pg_column_size(response_headers), 0))
		FROM `+s.records+` r`).Scan(&finishedSize, &claimSize); err != nil {
		t.Fatal(err)
	}
	t.Logf("%d updates, %d heap-only; rows: about %.0f bytes claimed, %.0f bytes SUCCESS", upd, hot, claimSize, finishedSize)
	if upd < total {
		t.Fatalf("PostgreSQL counted %d updates of the records, want %d", upd, total)
	}
	if hot < upd*8/10 {
		t.Fatalf("%d of %d updates were heap-only (HOT), want at least 80%%", hot, upd)
	}
}
