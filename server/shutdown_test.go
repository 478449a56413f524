package server_test

import (
	"bufio"
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/ledgerworks/ledger/api"
	"github.com/ledgerworks/ledger/apikey"
	"github.com/ledgerworks/ledger/server"
)

// On shutdown the server stops accepting connections, lets the request in
// flight finish (its body arrives after the shutdown began), stops its
// workers and returns; the ledger holds the request's entry.
func TestGracefulShutdown(t *testing.T) {
	db := openBolt(t)
	srv, err := server.New(server.Options{DB: db, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	_, token, err := apikey.Create(context.Background(), db, apikey.CreateRequest{Tenant: "acme", Scopes: writer})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ctx, srv.HTTPServer(server.Timeouts{}), ln, 10*time.Second, nil) }()

	conn, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	body := `{"type":"order/v1","payload":"e30="}`
	fmt.Fprintf(conn, "POST /v1/chains/orders/entries HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\nIdempotency-Key: k\r\n"+
		"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", token, len(body), body[:10])
	time.Sleep(100 * time.Millisecond) // the server reads the headers and waits for the body
	cancel()
	time.Sleep(100 * time.Millisecond)
	if c, err := net.DialTimeout("tcp", ln.Addr().String(), time.Second); err == nil {
		c.Close()
		t.Fatal("a new connection was accepted after the shutdown began")
	}
	select {
	case err := <-served:
		t.Fatalf("Serve returned %v with a request in flight", err)
	default:
	}
	fmt.Fprint(conn, body[10:])
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("the request in flight: %d", resp.StatusCode)
	}
	select {
	case err := <-served:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Serve did not return")
	}
	h, err := db.Head(context.Background(), "acme/orders")
	if err != nil || h.Seq != 1 {
		t.Fatalf("head %+v %v", h, err)
	}
	if resp.Header.Get(api.HeaderRequestID) == "" {
		t.Fatal("no request id")
	}
}
