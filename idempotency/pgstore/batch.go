package pgstore

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/ledgerworks/ledger/idempotency"
	"github.com/ledgerworks/ledger/internal/pgcolumn"
)

// Limits of a batcher.
const (
	// batchInflightMax is the number of batches a batcher sends at once
	// before calls wait for one to come back: a round trip's worth of
	// calls then go in the next statement. One: a statement's fixed cost
	// on the server (an autocommit transaction, the executor's start) is
	// most of a small batch's, and a second statement in flight halves
	// the batches when several servers split the requests.
	batchInflightMax = 1
	// batchItemsMax bounds the calls of one statement; the call that
	// fills a batch sends it even when batchInflightMax are in flight.
	batchItemsMax = 256
)

// batcher gathers concurrent calls of one statement into batches, each
// sent as one statement in one round trip: a call that finds fewer than
// batchInflightMax batches in flight sends its own at once, with the calls
// that waited before it; the others wait, and the sender that comes back
// first sends theirs. A lone call is sent alone, without waiting.
//
// A batch is sent under its first caller's context without its
// cancellation (the others wait for it), and each caller waits for its
// batch's answer rather than its own context: a statement whose outcome a
// caller did not wait for would leave a record it cannot know of.
type batcher[T, R any] struct {
	// send runs one statement for items and answers their results in the
	// items' order, or one error for all of them.
	send func(ctx context.Context, items []T) ([]R, error)

	mu       sync.Mutex
	inflight int
	pending  *batch[T, R]
}

type batch[T, R any] struct {
	items   []T
	results []R
	err     error
	done    chan struct{}
}

// do adds item to a batch and answers its result once the batch is sent.
func (b *batcher[T, R]) do(ctx context.Context, item T) (R, error) {
	b.mu.Lock()
	if b.pending == nil {
		b.pending = &batch[T, R]{done: make(chan struct{})}
	}
	bt := b.pending
	i := len(bt.items)
	bt.items = append(bt.items, item)
	if b.inflight >= batchInflightMax && len(bt.items) < batchItemsMax {
		b.mu.Unlock()
		<-bt.done
		return b.result(bt, i)
	}
	b.inflight++
	b.pending = nil
	b.mu.Unlock()
	b.run(context.WithoutCancel(ctx), bt)
	return b.result(bt, i)
}

func (b *batcher[T, R]) result(bt *batch[T, R], i int) (R, error) {
	if bt.err != nil {
		var zero R
		return zero, bt.err
	}
	return bt.results[i], nil
}

// run sends bt under ctx, then hands its slot to a goroutine that sends the batch
// gathered meanwhile, if any, so that its caller answers now.
func (b *batcher[T, R]) run(ctx context.Context, bt *batch[T, R]) {
	b.send1(ctx, bt)
	if next := b.next(); next != nil {
		go func() {
			for next != nil {
				b.send1(context.Background(), next) // its callers' spans may have ended
				next = b.next()
			}
		}()
	}
}

// next takes the pending batch for a sender that finished, or gives its
// slot back when there is none.
func (b *batcher[T, R]) next() *batch[T, R] {
	b.mu.Lock()
	defer b.mu.Unlock()
	next := b.pending
	if next == nil {
		b.inflight--
		return nil
	}
	b.pending = nil
	return next
}

func (b *batcher[T, R]) send1(ctx context.Context, bt *batch[T, R]) {
	defer close(bt.done)
	bt.results, bt.err = b.send(ctx, bt.items)
	if bt.err == nil && len(bt.results) != len(bt.items) {
		panic("pgstore: a batch answered a result count other than its items'")
	}
}

// claimed1 is a claim's answer in a batch: whether its row was inserted,
// and the attempt it was given.
type claimed1 struct {
	created bool
	attempt int
}

// sendClaims inserts the PROCESSING records of claims in one autocommit
// statement on the claims pool. The rows go in the scopes' order, as every
// batch's, so that two batches with a scope in common never wait for each
// other crosswise; a scope twice in one batch is inserted for its first
// claim only.
func (s *Store) sendClaims(ctx context.Context, claims []idempotency.Claim) ([]claimed1, error) {
	order := make([]int, len(claims))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return compareScopes(claims[a].Scope, claims[b].Scope) })
	n := len(claims)
	ops, users, keys, tokens := make([]string, 0, n), make([]string, 0, n), make([]string, 0, n), make([]string, 0, n)
	hashes := make([][]byte, 0, n)
	nows, leases, expires := make([]time.Time, 0, n), make([]time.Time, 0, n), make([]time.Time, 0, n)
	for j, i := range order {
		c := &claims[i]
		if j > 0 && claims[order[j-1]].Scope == c.Scope {
			continue
		}
		ops, users, keys, tokens = append(ops, c.Operation), append(users, c.User), append(keys, c.Key), append(tokens, c.Token)
		hashes = append(hashes, c.RequestHash[:])
		nows, leases, expires = append(nows, c.Now), append(leases, c.LeaseExpiresAt), append(expires, c.ExpiresAt)
	}
	rows, err := s.claims.Query(ctx, s.claimsSQL, pgcolumn.TextArray(ops), pgcolumn.TextArray(users), pgcolumn.TextArray(keys),
		pgcolumn.BytesArray(hashes), pgcolumn.TextArray(tokens), pgcolumn.TimeArray(nows), pgcolumn.TimeArray(leases), pgcolumn.TimeArray(expires))
	if err != nil {
		return nil, err
	}
	// A row comes back for each claim inserted, with its scope as sent:
	// found among the sent ones (in the scopes' order) by comparing its
	// bytes, read in place, so that no row costs a string or a map entry.
	attempts := make([]int, len(ops)) // 0: not inserted
	var op, user, key pgtype.DriverBytes
	var attempt int
	_, err = pgx.ForEachRow(rows, []any{&op, &user, &key, &attempt}, func() error {
		lo, hi := 0, len(ops)
		for lo < hi {
			mid := int(uint(lo+hi) >> 1)
			if compareRow(op, user, key, ops[mid], users[mid], keys[mid]) > 0 {
				lo = mid + 1
			} else {
				hi = mid
			}
		}
		if lo == len(ops) || compareRow(op, user, key, ops[lo], users[lo], keys[lo]) != 0 {
			return fmt.Errorf("pgstore: a claim's row came back for a scope the batch did not send")
		}
		attempts[lo] = attempt
		return nil
	})
	if err != nil {
		return nil, err
	}
	out := make([]claimed1, n)
	k := -1 // the sent scope of order[j]
	for j, i := range order {
		first := j == 0 || claims[order[j-1]].Scope != claims[i].Scope
		if first {
			k++
		}
		out[i] = claimed1{created: first && attempts[k] > 0, attempt: attempts[k]}
	}
	return out, nil
}

// compareRow compares a returned scope's bytes with a sent scope, as
// compareScopes orders scopes.
func compareRow(op, user, key []byte, sop, suser, skey string) int {
	if c := compareBytes(op, sop); c != 0 {
		return c
	}
	if c := compareBytes(user, suser); c != 0 {
		return c
	}
	return compareBytes(key, skey)
}

// compareBytes is strings.Compare(string(b), s), written with the
// comparison operators, which convert b without a copy.
func compareBytes(b []byte, s string) int {
	switch {
	case string(b) == s:
		return 0
	case string(b) < s:
		return -1
	}
	return 1
}

func compareScopes(a, b idempotency.Scope) int {
	if c := strings.Compare(a.Operation, b.Operation); c != 0 {
		return c
	}
	if c := strings.Compare(a.User, b.User); c != 0 {
		return c
	}
	return strings.Compare(a.Key, b.Key)
}

// claimsSQL is the claims' statement on the tables records and retries:
// sendClaims' batch, or one claim in the transaction of New's store.
func claimsSQL(records, retries string) string {
	return `INSERT INTO ` + records + ` (operation, user_id, key, status, request_hash, token, attempt,
			created_at, updated_at, lease_expires_at, expires_at)
		SELECT c.operation, c.user_id, c.key, 'PROCESSING', c.request_hash, c.token,
			1 + coalesce((SELECT r.retries FROM ` + retries + ` r
				WHERE r.operation = c.operation COLLATE "C" AND r.user_id = c.user_id COLLATE "C"
				AND r.key = c.key COLLATE "C" AND r.expires_at > c.now), 0),
			c.now, c.now, c.lease_expires_at, c.expires_at
		FROM unnest($1::text[], $2::text[], $3::text[], $4::bytea[], $5::text[], $6::timestamptz[], $7::timestamptz[], $8::timestamptz[])
			AS c (operation, user_id, key, request_hash, token, now, lease_expires_at, expires_at)
		ON CONFLICT (operation, user_id, key) DO NOTHING
		RETURNING operation, user_id, key, attempt`
}

// success is one Succeed call in a batch.
type success struct {
	sc        idempotency.Scope
	token     string
	now       time.Time
	status    int
	headers   string
	body      []byte
	expiresAt time.Time
}

// sendSuccesses writes SUCCESS records in one statement, one transaction
// and one WAL flush for the batch. A record no longer held by its call's
// token is left alone and answers false.
func (s *Store) sendSuccesses(ctx context.Context, batch []success) ([]bool, error) {
	n := len(batch)
	ops, users, keys, tokens, headers := make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n)
	nows, expires := make([]time.Time, n), make([]time.Time, n)
	statuses := make([]int32, n)
	bodies := make([][]byte, n)
	for i, b := range batch {
		ops[i], users[i], keys[i], tokens[i], headers[i] = b.sc.Operation, b.sc.User, b.sc.Key, b.token, b.headers
		nows[i], expires[i], statuses[i], bodies[i] = b.now, b.expiresAt, int32(b.status), b.body
	}
	rows, err := s.pool.Query(ctx, s.successesSQL, ops, users, keys, tokens, nows, statuses, headers, bodies, expires)
	if err != nil {
		return nil, err
	}
	type attempt struct {
		sc    idempotency.Scope
		token string
	}
	held := make(map[attempt]bool, n)
	var a attempt
	if _, err := pgx.ForEachRow(rows, []any{&a.sc.Operation, &a.sc.User, &a.sc.Key, &a.token}, func() error {
		held[a] = true
		return nil
	}); err != nil {
		return nil, err
	}
	out := make([]bool, n)
	for i, b := range batch {
		out[i] = held[attempt{b.sc, b.token}]
	}
	return out, nil
}

// successesSQL is sendSuccesses' statement on the table records: update's
// condition (held) for each row of the batch.
func successesSQL(records string) string {
	return `UPDATE ` + records + ` r SET status = 'SUCCESS', response_status = u.status,
			response_headers = u.headers::jsonb, response_body = u.body, finished_expires_at = u.expires_at, updated_at = u.now
		FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::timestamptz[], $6::int4[], $7::text[], $8::bytea[], $9::timestamptz[])
			AS u (operation, user_id, key, token, now, status, headers, body, expires_at)
		WHERE r.operation = u.operation COLLATE "C" AND r.user_id = u.user_id COLLATE "C" AND r.key = u.key COLLATE "C"
			AND r.token = u.token AND r.status = 'PROCESSING' AND r.expires_at > u.now
		RETURNING r.operation, r.user_id, r.key, r.token`
}
