package chain_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/ledgerworks/ledger/chain"
	"github.com/ledgerworks/ledger/storage/postgres/pgtest"
)

// TestLateJoinersOnPostgres: a group waiting for a head another process
// holds takes, before its commit, the requests that queued meanwhile on
// the chains it holds, instead of leaving them to a group of their own
// that would wait its turn again. A request on a chain the group does not
// hold is left to the next group. Every request is answered once, and the
// ledger verifies.
func TestLateJoinersOnPostgres(t *testing.T) {
	backends := pgtest.OpenShared(t, 2)
	sizes := &groupLog{}
	a, err := chain.OpenBackend(backends[0], chain.Options{Metrics: sizes})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close() })
	other, err := chain.OpenBackend(backends[1], chain.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { other.Close() })
	ctx := context.Background()
	for _, c := range []string{"join/a", "join/b"} {
		mustAppend(t, a, chain.Request{Chain: c, Type: "t/v1", Payload: []byte("{}")})
	}
	sizes.reset()

	// The other process holds join/a's head until released.
	locked, release, otherDone := make(chan struct{}), make(chan struct{}), make(chan error, 1)
	go func() {
		otherDone <- other.Update(ctx, func(tx *chain.Tx) error {
			if _, err := tx.Append(chain.Request{Chain: "join/a", Type: "t/v1", Payload: []byte("{}")}); err != nil {
				return err
			}
			close(locked)
			<-release
			return nil
		})
	}()
	<-locked

	const joiners = 5
	results := make(chan error, joiners+2)
	appendTo := func(c, key string) {
		_, err := a.Append(ctx, chain.Request{Chain: c, IdempotencyKey: key, Type: "t/v1", Payload: []byte("{}")})
		results <- err
	}
	go appendTo("join/a", "first")
	waitForLockWait(t)
	for i := range joiners {
		go appendTo("join/a", fmt.Sprintf("joiner-%d", i))
	}
	go appendTo("join/b", "elsewhere")
	for chain.QueueLen(a) < joiners+1 {
		time.Sleep(time.Millisecond)
	}
	close(release)
	if err := <-otherDone; err != nil {
		t.Fatal(err)
	}
	for range joiners + 2 {
		if err := <-results; err != nil {
			t.Fatal(err)
		}
	}
	if got := sizes.get(); len(got) != 2 || got[0] != joiners+1 || got[1] != 1 {
		t.Errorf("groups of %v requests, want [%d 1]: the first with its joiners, then the other chain's", got, joiners+1)
	}
	for c, want := range map[string]uint64{"join/a": 2 + joiners + 1, "join/b": 2} {
		if h, err := a.Head(ctx, c); err != nil || h.Seq != want {
			t.Errorf("%s: head %d, %v; want %d", c, h.Seq, err, want)
		}
	}
	assertVerifies(t, a)
}

// groupLog records the size of each group committed.
type groupLog struct {
	mu    sync.Mutex
	sizes []int
}

func (g *groupLog) GroupCommitted(requests int, _ time.Duration) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.sizes = append(g.sizes, requests)
}

func (g *groupLog) Replayed() {}

func (g *groupLog) reset() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.sizes = nil
}

func (g *groupLog) get() []int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return slices.Clone(g.sizes)
}

// waitForLockWait returns once a session of the test database waits for a
// row lock on a chain head.
func waitForLockWait(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, pgtest.URL(t))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	for {
		var n int
		err := conn.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
			WHERE datname = current_database() AND wait_event_type = 'Lock' AND query LIKE '%FROM chains%FOR UPDATE%'`).Scan(&n)
		if err != nil {
			t.Fatal(err)
		}
		if n > 0 {
			return
		}
		time.Sleep(time.Millisecond)
	}
}
