package outbox_test

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"github.com/ledgerworks/ledger/chain"
	"github.com/ledgerworks/ledger/outbox"
	"github.com/ledgerworks/ledger/storage/postgres"
)

// The child process of the crash and multi-process tests: the test binary,
// started again with childEnv set, runs one worker on the ledger the
// environment names until it is killed (SIGKILL) or asked to stop
// (SIGTERM). Its handler reports every attempt to the parent's receiver
// and waits a little, so that a kill lands mid-delivery.
const (
	childEnv      = "OUTBOX_TEST_CHILD"
	childLedger   = "OUTBOX_TEST_LEDGER"    // a bbolt file, or empty for PostgreSQL
	childPGURL    = "OUTBOX_TEST_PG_URL"    // with childPGSchema
	childPGSchema = "OUTBOX_TEST_PG_SCHEMA" //
	childSink     = "OUTBOX_TEST_SINK"      // the parent's receiver
	childDelay    = "OUTBOX_TEST_DELAY_MS"  // how long a handler call takes
	childLease    = "OUTBOX_TEST_LEASE_MS"
	childTopic    = "crash"
	childTenant   = "acme"
)

func childMain() int {
	ctx := context.Background()
	var db *chain.DB
	var err error
	if path := os.Getenv(childLedger); path != "" {
		db, err = chain.Open(path, chain.Options{})
	} else {
		var b *postgres.Backend
		b, err = postgres.Open(ctx, os.Getenv(childPGURL), postgres.Options{Schema: os.Getenv(childPGSchema)})
		if err == nil {
			db, err = chain.OpenBackend(b, chain.Options{})
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "child: open:", err)
		return 1
	}
	delay, _ := strconv.Atoi(os.Getenv(childDelay))
	leaseMS, _ := strconv.Atoi(os.Getenv(childLease))
	sink := os.Getenv(childSink)
	client := &http.Client{Timeout: 5 * time.Second}
	handler := func(ctx context.Context, d *outbox.Delivery) error {
		body := fmt.Sprintf("%s %s %d %d", d.Message.IdempotencyKey, d.Message.Key, d.Token, os.Getpid())
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, sink, bytes.NewBufferString(body))
		req.Header.Set("Idempotency-Key", d.Message.Key)
		resp, err := client.Do(req)
		if err != nil {
			return err
		}
		resp.Body.Close()
		time.Sleep(time.Duration(delay) * time.Millisecond)
		if resp.StatusCode/100 != 2 {
			return fmt.Errorf("receiver answered %s", resp.Status)
		}
		return nil
	}
	w, err := outbox.NewWorker(db, outbox.WorkerOptions{Tenant: childTenant, Concurrency: 8, ClaimBatch: 16,
		LeaseDuration: time.Duration(leaseMS) * time.Millisecond, PollInterval: 20 * time.Millisecond,
		Topics: map[string]outbox.Topic{childTopic: {Handler: handler, Policy: outbox.Policy{BackoffMin: 10 * time.Millisecond, BackoffMax: 50 * time.Millisecond}}}})
	if err == nil {
		err = w.Start(ctx)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "child: worker:", err)
		return 1
	}
	fmt.Println("ready")
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM)
	<-stop
	if err := w.Stop(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "child: stop:", err)
	}
	if err := db.Close(); err != nil {
		fmt.Fprintln(os.Stderr, "child: close:", err)
		return 1
	}
	return 0
}
