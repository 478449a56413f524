package client_test

import (
	"context"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ledgerworks/ledger/api"
	"github.com/ledgerworks/ledger/client"
)

// TestServerKilledDuringPurchaseReceipts SIGKILLs ledgerctl serve twice
// during a burst of purchase receipts from 16 callers and restarts it on
// the same file and port each time. Every receipt must end written exactly
// once: its call succeeds, and stock, valuation, journal and outbox each
// hold exactly the sum of the receipts; then ledgerctl verify finds the
// ledger intact.
func TestServerKilledDuringPurchaseReceipts(t *testing.T) {
	t.Parallel()
	const receipts, callers = 150, 16
	db := filepath.Join(t.TempDir(), "ledger.db")
	token := createKey(t, db, tenant, "read,write,admin")
	first := serve(t, db, "127.0.0.1:0")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var networkRetries atomic.Int64
	c := newClient(t, first.URL, token, client.Options{MaxAttempts: client.MaxAttemptsMax, BackoffBase: 10 * time.Millisecond,
		BackoffMax: 200 * time.Millisecond, AttemptTimeout: 20 * time.Second, OnRetry: func(e client.RetryEvent) {
			if client.ErrorCode(e.Err) == client.CodeNetworkError {
				networkRetries.Add(1)
			}
		}})
	defineCatalog(t, ctx, c)

	var acked atomic.Int64
	type restart struct {
		s   *served
		err error
	}
	restarted := make(chan restart, 1)
	go func() { // kill at a third and at two thirds of the burst
		s := first
		for _, at := range []int64{receipts / 3, 2 * receipts / 3} {
			for acked.Load() < at && ctx.Err() == nil {
				time.Sleep(time.Millisecond)
			}
			s.Kill()
			time.Sleep(100 * time.Millisecond)
			var err error
			if s, err = startServe(t, db, first.Addr); err != nil {
				cancel() // the callers give up; the test reports err
				restarted <- restart{err: err}
				return
			}
		}
		restarted <- restart{s: s}
	}()

	began := time.Now()
	var next atomic.Int64
	var wg sync.WaitGroup
	events := make([]api.BusinessEvent, receipts)
	keys := make([]string, receipts)
	errs := make([]error, receipts)
	for range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := int(next.Add(1) - 1); i < receipts; i = int(next.Add(1) - 1) {
				var info client.ResponseInfo
				events[i], errs[i] = c.PurchaseReceipt(ctx, receipt(i), client.WithResponseInfo(&info))
				keys[i] = info.Key
				acked.Add(1)
			}
		}()
	}
	wg.Wait()
	r := <-restarted
	if r.err != nil {
		t.Fatalf("restarting the server: %v", r.err)
	}
	last := r.s
	var sumQty int64
	operations := map[string]int{}
	for i := range receipts {
		if errs[i] != nil {
			t.Fatalf("receipt %d (key %s): %v\nserver output:\n%s", i, keys[i], errs[i], last.Output())
		}
		if j, dup := operations[events[i].Operation]; dup || events[i].Operation == "" {
			t.Fatalf("receipts %d and %d answered with one operation %q", j, i, events[i].Operation)
		}
		operations[events[i].Operation] = i
		q, _ := strconv.ParseInt(receipt(i).Quantity, 10, 64)
		sumQty += q
	}
	if networkRetries.Load() == 0 {
		t.Fatal("no call met the killed server: the kills did not land during the burst")
	}
	t.Logf("%d receipts in %v, %d retries after network errors", receipts, time.Since(began).Round(time.Millisecond), networkRetries.Load())
	checkReceiptTotals(t, ctx, c, receipts, sumQty)
	last.Stop()
	if code, out, errOut := runCLI(t, "--db", db, "verify"); code != 0 {
		t.Fatalf("ledgerctl verify: exit %d\n%s%s", code, out, errOut)
	}
}

// checkReceiptTotals checks that stock, valuation, journal and outbox each
// hold n receipts of sumQty sacks at 2.50 in all.
func checkReceiptTotals(t *testing.T, ctx context.Context, c *client.Client, n int, sumQty int64) {
	t.Helper()
	value := cents(sumQty * 250)
	stock, err := c.StockBalance(ctx, testItem, testLocation, client.StockAt{})
	if err != nil || stock.Quantity != strconv.FormatInt(sumQty, 10) {
		t.Fatalf("stock %+v, %v: want quantity %d", stock, err, sumQty)
	}
	if then, err := c.StockBalance(ctx, testItem, testLocation, client.StockAt{Time: time.Now().Add(time.Hour)}); err != nil || then.Quantity != stock.Quantity {
		t.Fatalf("stock at a later time %+v, %v: want quantity %d", then, err, sumQty)
	}
	hist, err := c.StockHistory(ctx, testItem, testLocation, 0, n+10)
	if err != nil || len(hist.Entries) != n {
		t.Fatalf("stock history: %d entries, %v: want %d", len(hist.Entries), err, n)
	}
	val, err := c.ValBalance(ctx, testItem, testLocation, 0)
	if err != nil || len(val.Balances) != 1 || val.Balances[0].Quantity != stock.Quantity || val.Balances[0].Value != value {
		t.Fatalf("valuation %+v, %v: want quantity %d, value %s", val, err, sumQty, value)
	}
	inv, err := c.AccountBalance(ctx, testBook, testInventory, "EUR", client.FinAt{})
	if err != nil || inv.Amount != value || inv.Postings != uint64(n) {
		t.Fatalf("inventory account %+v, %v: want %s in %d postings", inv, err, value, n)
	}
	stats, err := c.OutboxStats(ctx, api.TopicDefault)
	if err != nil || len(stats.Topics) != 1 || stats.Topics[0].Enqueued != int64(n) {
		t.Fatalf("outbox %+v, %v: want %d messages enqueued", stats, err, n)
	}
	report, err := c.Verify(ctx, api.VerifyRequest{})
	if err != nil || !report.OK {
		t.Fatalf("verify over HTTP: %+v, %v", report, err)
	}
}
