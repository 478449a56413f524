package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"reflect"
	"strings"
	"sync"
	"time"

	"github.com/ledgerworks/ledger/api"
	"github.com/ledgerworks/ledger/apikey"
	"github.com/ledgerworks/ledger/client"
	"github.com/ledgerworks/ledger/idempotency"
	"github.com/ledgerworks/ledger/server"
	"github.com/ledgerworks/ledger/server/ratelimit"
)

// The server step: the HTTP API of ledgerctl serve on 127.0.0.1, driven by
// the Go client, showing the four layers of exactly-once on one purchase
// receipt. It shares order 90 with the verification step and runs first
// (steps of one order run by name), so that verification covers it.

func init() {
	registerDemoStep(90, "HTTP API: ledgerctl serve and its Go client, the four layers of exactly-once on one purchase receipt", demoServer)
}

const (
	demoServerItem     = "OATS-1000"
	demoServerLocation = "RCV-DOCK"
)

// demoServerReceipt is the purchase receipt the step sends.
func demoServerReceipt(quantity string) api.PurchaseReceiptRequest {
	return api.PurchaseReceiptRequest{Item: demoServerItem, Location: demoServerLocation, Quantity: quantity, UnitCost: "3.20",
		Date: "2026-11-04", InventoryAccount: demoValInventory, CreditAccount: demoValGRNI, Reference: "PO-2026-0815"}
}

// demoReceiver is the ERP's webhook endpoint on 127.0.0.1: it records the
// Idempotency-Key of every delivery, as a receiver that deduplicates does.
type demoReceiver struct {
	mu   sync.Mutex
	keys []string
	got  chan struct{}
}

func (r *demoReceiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	io.Copy(io.Discard, req.Body)
	r.mu.Lock()
	r.keys = append(r.keys, req.Header.Get("Idempotency-Key"))
	if len(r.keys) == 1 {
		close(r.got)
	}
	r.mu.Unlock()
	w.WriteHeader(http.StatusNoContent)
}

func demoServer(ctx context.Context, d *demoEnv) error {
	key, token, err := apikey.Create(ctx, d.DB, apikey.CreateRequest{Tenant: d.Tenant, Name: "erp-receiving",
		Scopes: []apikey.Scope{apikey.ScopeRead, apikey.ScopeWrite, apikey.ScopeAdmin}})
	if err != nil {
		return err
	}
	d.Printf("API key %s of tenant %s (read, write, admin) created; its secret is shown once, its digest kept\n", key.ID, d.Tenant)
	receiver := &demoReceiver{got: make(chan struct{})}
	hookURL, stopHooks, err := demoServe(receiver)
	if err != nil {
		return err
	}
	defer stopHooks()
	// The guard's records: in the ledger file on the embedded default; in
	// memory for this demo on PostgreSQL (services there use
	// idempotency/pgstore, shared by their instances).
	var store idempotency.Store
	if ls, err := idempotency.NewLedgerStore(d.DB); err == nil {
		store = ls
	} else {
		store = idempotency.NewMemoryStore()
	}
	// The server delivers the tenant's business events to the ERP's webhook,
	// as a "deliveries" entry of ledgerctl serve --config does. Message ages
	// count from the entries' times, which a test's ledger takes from a
	// fixed clock in the past: hence the long max_age. The ERP's webhook
	// listens on loopback, which a delivery reaches only when it says so.
	deliveries := []server.Delivery{{Tenant: d.Tenant, Topic: api.TopicDefault, URL: hookURL + "/erp/ledger-events",
		Secret: demoOutboxSecret, Timeout: server.Duration(5 * time.Second), MaxAge: server.Duration(100 * 365 * 24 * time.Hour),
		AllowPrivateAddresses: true}}
	newServer := func(store idempotency.Store) (*server.Server, error) {
		s, err := server.New(server.Options{DB: d.DB, Logger: demoQuiet, IdempotencyStore: store, JobsInterval: -1,
			RateLimit: ratelimit.Options{PerKey: 50, KeyBurst: 50, PerAddr: 100, AddrBurst: 100}, Deliveries: deliveries})
		if err != nil {
			return nil, err
		}
		return s, s.Start(ctx)
	}

	// Layer 1: the client makes one key for the intent and sends the same
	// key and body until an answer comes, here first to a port where the
	// server is not listening yet.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	addr := ln.Addr().String()
	ln.Close()
	var mu sync.Mutex
	var retries []client.RetryEvent
	firstRetry := make(chan struct{})
	c, err := client.New(client.Options{BaseURL: "http://" + addr, Token: token, BackoffBase: 50 * time.Millisecond,
		OnRetry: func(e client.RetryEvent) {
			mu.Lock()
			defer mu.Unlock()
			if retries = append(retries, e); len(retries) == 1 {
				close(firstRetry)
			}
		}})
	if err != nil {
		return err
	}
	defer c.CloseIdleConnections()
	s, err := newServer(store)
	if err != nil {
		return err
	}
	stop, err := demoListen(addr, s)
	if err != nil {
		s.Stop(ctx)
		return err
	}
	err = demoServerCatalog(ctx, c)
	stop()
	if err != nil {
		return err
	}
	d.Printf("item %s and location %s defined through the API; the server stopped\n", demoServerItem, demoServerLocation)
	intent := c.NewKey()
	type answer struct {
		ev   api.BusinessEvent
		info client.ResponseInfo
		err  error
	}
	done := make(chan answer, 1)
	go func() {
		var a answer
		a.ev, a.err = c.PurchaseReceipt(ctx, demoServerReceipt("12"), client.WithIdempotencyKey(intent), client.WithResponseInfo(&a.info))
		done <- a
	}()
	select {
	case <-firstRetry:
	case a := <-done:
		return fmt.Errorf("the receipt was answered before the server listened: %+v, %v", a.info, a.err)
	}
	if s, err = newServer(store); err != nil {
		return err
	}
	if stop, err = demoListen(addr, s); err != nil {
		s.Stop(ctx)
		return err
	}
	first := <-done
	if first.err != nil {
		stop()
		return first.err
	}
	mu.Lock()
	d.Printf("1. client: receipt of PO-2026-0815 (12 bags at 3.20) is one intent, Idempotency-Key %s;\n", intent)
	for _, e := range retries {
		d.Printf("   attempt %d: %s (the server was not listening yet): the client waits %v, then sends the same key and body\n",
			e.Attempt, client.ErrorCode(e.Err), e.Wait.Round(time.Millisecond))
	}
	mu.Unlock()
	ev := first.ev
	d.Printf("   server listening on http://%s (rate limit 50/s a key → API key → replay guard → handler)\n", addr)
	d.Printf("   attempt %d: %d: operation %s wrote stock %s seq %d, valuation %s, posting seq %d and outbox message %s in one transaction\n",
		first.info.Attempts, first.info.Status, ev.Operation, demoFirstChain(ev), demoFirstSeq(ev), demoValueChange(ev), ev.Posting.Seq, ev.Message.ID)

	// Layer 2: the guard answers a retry with the stored response.
	var info client.ResponseInfo
	again, err := c.PurchaseReceipt(ctx, demoServerReceipt("12"), client.WithIdempotencyKey(intent), client.WithResponseInfo(&info))
	if err != nil {
		stop()
		return err
	}
	if !info.Replayed || !reflect.DeepEqual(again, ev) {
		stop()
		return fmt.Errorf("the retry was not replayed by the guard: %+v", info)
	}
	d.Printf("2. replay guard: the receipt retried (its answer lost): %d replayed=true (Idempotent-Replayed: true), the first answer; the handler did not run\n", info.Status)
	d.Replayed(1)
	_, err = c.PurchaseReceipt(ctx, demoServerReceipt("13"), client.WithIdempotencyKey(intent), client.WithResponseInfo(&info))
	var refused *client.Error
	if !errors.As(err, &refused) || refused.Code != api.CodeKeyReused {
		stop()
		return fmt.Errorf("the key reused for 13 bags: want %s, got %v", api.CodeKeyReused, err)
	}
	d.Printf("   the same key for 13 bags: %d %s after %d attempt (never retried); nothing written\n", refused.Status, refused.Code, refused.Attempts)

	// Layer 4: the server's outbox worker delivers the message with the key
	// derived from its id.
	select {
	case <-receiver.got:
	case <-time.After(30 * time.Second):
		stop()
		return errors.New("the outbox message was not delivered in 30 s")
	}
	status, err := demoMessageStatus(ctx, c, ev.Message.ID)
	if err != nil {
		stop()
		return err
	}
	stop()

	// Layer 3: a server over the same ledger whose guard records were lost
	// runs the handler again; the ledger's UNIQUE(chain, key) finds every
	// part and writes nothing.
	s, err = newServer(idempotency.NewMemoryStore())
	if err != nil {
		return err
	}
	if stop, err = demoListen(addr, s); err != nil {
		s.Stop(ctx)
		return err
	}
	defer stop()
	lost, err := c.PurchaseReceipt(ctx, demoServerReceipt("12"), client.WithIdempotencyKey(intent), client.WithResponseInfo(&info))
	if err != nil {
		return err
	}
	if info.Replayed || !lost.Stock.Replayed || !lost.Valuation.Replayed || !lost.Posting.Replayed || lost.Operation != ev.Operation {
		return fmt.Errorf("the retry without guard records wrote again: %+v", lost)
	}
	d.Printf("3. ledger: a server over the same ledger with its guard records lost: the retry runs the handler, and the ledger\n" +
		"   finds every part under the keys derived from the request's: stock, valuation and posting replayed=true, nothing written\n")
	d.Replayed(1)

	receiver.mu.Lock()
	keys := strings.Join(receiver.keys, ", ")
	receiver.mu.Unlock()
	d.Printf("4. outbox: message %s, enqueued with the receipt, delivered by the server's outbox worker\n"+
		"   to the ERP's webhook on 127.0.0.1 (signed) with Idempotency-Key %s (the receiver dedupes on it); status %s\n", ev.Message.ID, keys, status)
	return nil
}

// demoServerCatalog defines the step's item (in stock and for valuation)
// and its location through the API. The book, its EUR and its accounts
// are the financial steps'.
func demoServerCatalog(ctx context.Context, c *client.Client) error {
	if _, err := c.DefineStockItem(ctx, api.StockItemRequest{ID: demoServerItem, Name: "Rolled oats, 1000 kg bag"}); err != nil {
		return err
	}
	if _, err := c.DefineStockLocation(ctx, api.StockLocationRequest{ID: demoServerLocation, Name: "Receiving dock"}); err != nil {
		return err
	}
	_, err := c.DefineValItem(ctx, api.ValItemRequest{ID: demoServerItem, Method: "moving_average", Currency: "EUR", MinorUnit: 2})
	return err
}

// demoMessageStatus waits up to 10 s for message id to be done (its
// worker records the outcome after the receiver answered) and returns
// its status.
func demoMessageStatus(ctx context.Context, c *client.Client, id string) (string, error) {
	status := "not found"
	for range 100 {
		for _, st := range []string{"done", ""} {
			msgs, err := c.OutboxMessages(ctx, client.OutboxFilter{Topic: api.TopicDefault, Status: st})
			if err != nil {
				return "", err
			}
			for _, m := range msgs.Messages {
				if m.ID == id {
					status = m.Status
				}
			}
			if status == "done" {
				return status, nil
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	return status, nil
}

// demoListen serves s on addr until the returned stop, which also stops
// s's background work.
func demoListen(addr string, s *server.Server) (func(), error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	hs := &http.Server{Handler: s.Handler(), ReadHeaderTimeout: 5 * time.Second}
	go hs.Serve(ln)
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		hs.Shutdown(ctx)
		s.Stop(ctx)
	}, nil
}

func demoFirstChain(ev api.BusinessEvent) string {
	if len(ev.Stock.Entries) == 0 {
		return "?"
	}
	return ev.Stock.Entries[0].Chain
}

func demoFirstSeq(ev api.BusinessEvent) uint64 {
	if len(ev.Stock.Entries) == 0 {
		return 0
	}
	return ev.Stock.Entries[0].Seq
}

func demoValueChange(ev api.BusinessEvent) string {
	if len(ev.Valuation.Legs) == 0 {
		return "?"
	}
	return "+" + strings.TrimPrefix(ev.Valuation.Legs[0].ValueChange, "+")
}
