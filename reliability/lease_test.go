package reliability

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/ledgerworks/ledger/api"
	"github.com/ledgerworks/ledger/client"
)

// crashFreeBound is how soon after a server dies its keys answer again
// (docs/SERVER.md): the default lease, 10 s, and a retry's rounding.
const crashFreeBound = 15 * time.Second

// A server that dies while its request waits for a chain's head leaves the
// key PROCESSING. Another server answers the retry as soon as the dead
// attempt's lease ends, well within 15 s, and the entry is written once.
func TestCrashedServersKeyIsFreeWithinFifteenSeconds(t *testing.T) {
	l := newPGLedger(t)
	a := mustStartServer(t, l.url)
	b := mustStartServer(t, l.url)
	ctx := context.Background()
	cb, err := client.New(client.Options{BaseURL: b.URL, Token: l.token})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cb.AppendEntry(ctx, "held", api.AppendRequest{Type: "t", Payload: []byte("first")}); err != nil {
		t.Fatal(err)
	}

	// Hold the head of acme/held, as another transaction would.
	holder := l.conn(t)
	tx, err := holder.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, "SELECT head_seq FROM chains WHERE chain_id = 'acme/held' FOR UPDATE"); err != nil {
		t.Fatal(err)
	}
	req := api.AppendRequest{Type: "t", Payload: []byte("once")}
	sent := make(chan error, 1)
	go func() {
		ca, err := client.New(client.Options{BaseURL: a.URL, Token: l.token, MaxAttempts: 1})
		if err == nil {
			_, err = ca.AppendEntry(ctx, "held", req, client.WithIdempotencyKey("crash-key"))
		}
		sent <- err
	}()
	waitForLockWaiter(t, l)
	a.Kill()
	died := time.Now()
	if err := <-sent; client.ErrorCode(err) != client.CodeNetworkError {
		t.Fatalf("the request to the killed server: %v, want no answer", err)
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}

	// The first retry on B: the key is held by A's attempt, for the rest
	// of its lease, which Retry-After tells.
	status, retryAfter, code := rawAppend(t, b.URL, l.token, "crash-key", req)
	if status != http.StatusConflict || code != api.CodeInProgress || retryAfter < 1 || retryAfter > 10 {
		t.Fatalf("first retry: %d %s Retry-After %d, want 409 REQUEST_IN_PROGRESS with 1..10 s", status, code, retryAfter)
	}
	res, err := cb.AppendEntry(ctx, "held", req, client.WithIdempotencyKey("crash-key"))
	took := time.Since(died)
	if err != nil {
		t.Fatalf("retry on the other server: %v (after %v)\nA: %s\nB: %s", err, took, a.Output(), b.Output())
	}
	if took > crashFreeBound {
		t.Fatalf("the key answered %v after its server died, want within %v", took, crashFreeBound)
	}
	t.Logf("key answered %v after its server died", took)
	page, err := cb.Entries(ctx, "held", 1, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Entries) != 2 || res.Seq != 2 {
		t.Fatalf("%d entries, the retry's seq %d: want the entry written once, at seq 2", len(page.Entries), res.Seq)
	}
}

// waitForLockWaiter waits until a session of the ledger's database waits
// for a row lock.
func waitForLockWaiter(t *testing.T, l *pgLedger) {
	t.Helper()
	conn := l.conn(t)
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		var n int
		err := conn.QueryRow(context.Background(), `SELECT count(*) FROM pg_stat_activity
			WHERE datname = current_database() AND wait_event_type = 'Lock' AND pid <> pg_backend_pid()`).Scan(&n)
		if err != nil {
			t.Fatal(err)
		}
		if n > 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("no session waits for the held head after 30 s")
		}
	}
}

// rawAppend posts req with key once, without the client's retries, and
// returns the status, Retry-After and problem code.
func rawAppend(t *testing.T, url, token, key string, req api.AppendRequest) (int, int, string) {
	t.Helper()
	c, err := client.New(client.Options{BaseURL: url, Token: token, MaxAttempts: 1})
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.AppendEntry(context.Background(), "held", req, client.WithIdempotencyKey(key))
	var e *client.Error
	if !errors.As(err, &e) {
		return http.StatusCreated, 0, ""
	}
	return e.Status, int(e.RetryAfter / time.Second), e.Code
}
