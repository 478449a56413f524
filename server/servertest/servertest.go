// Package servertest starts the HTTP server in-process for tests and
// benchmarks, and holds the bare handler the server's benchmarks are
// measured against.
package servertest

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ledgerworks/ledger/api"
	"github.com/ledgerworks/ledger/apikey"
	"github.com/ledgerworks/ledger/chain"
	"github.com/ledgerworks/ledger/server"
)

// Running is a server serving on 127.0.0.1.
type Running struct {
	Server *server.Server
	// URL is the base URL, http://127.0.0.1:PORT.
	URL  string
	http *http.Server
	once sync.Once
}

// Close shuts the HTTP server down (requests in flight finish) and stops
// the server's background work; the ledger stays open. Start registers
// it with tb.Cleanup; a test that restarts a server calls it first.
func (r *Running) Close() {
	r.once.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = r.http.Shutdown(ctx)
		_ = r.Server.Stop(ctx)
	})
}

// Start builds a server from opts (DB required; a silent logger when
// opts.Logger is nil), starts it and serves it with its own timeouts on a
// free port of 127.0.0.1 until tb ends or Close is called.
func Start(tb testing.TB, opts server.Options) *Running {
	tb.Helper()
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	srv, err := server.New(opts)
	if err != nil {
		tb.Fatal(err)
	}
	if err := srv.Start(context.Background()); err != nil {
		tb.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	r := &Running{Server: srv, URL: "http://" + ln.Addr().String(), http: srv.HTTPServer(server.Timeouts{})}
	go func() { _ = r.http.Serve(server.Listener(ln)) }()
	tb.Cleanup(r.Close)
	return r
}

// Serve serves h on a free port of 127.0.0.1 with the server's timeouts
// until tb ends, and returns its base URL.
func Serve(tb testing.TB, h http.Handler) string {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	hs := &http.Server{Handler: h, ReadHeaderTimeout: server.ReadHeaderTimeoutDefault, IdleTimeout: server.IdleTimeoutDefault}
	go func() { _ = hs.Serve(ln) }()
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = hs.Shutdown(ctx)
	})
	return "http://" + ln.Addr().String()
}

// Key creates an API key of tenant with scopes on db and returns its token.
func Key(tb testing.TB, db *chain.DB, tenant string, scopes ...apikey.Scope) string {
	tb.Helper()
	_, token, err := apikey.Create(context.Background(), db, apikey.CreateRequest{Tenant: tenant, Name: "test", Scopes: scopes})
	if err != nil {
		tb.Fatal(err)
	}
	return token
}

// BareAppend is the baseline of the server's benchmarks: POST
// /v1/chains/{name}/entries appends the body's entry to tenant/{name}
// under the request's Idempotency-Key, and answers 201 with the server's
// AppendResponse, with no rate limit, API key, replay guard, access log or
// metrics: what net/http and the engine cost alone.
func BareAppend(db *chain.DB, tenant string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		name, ok := strings.CutSuffix(strings.TrimPrefix(r.URL.Path, "/v1/chains/"), "/entries")
		if r.Method != http.MethodPost || !ok || name == "" {
			http.NotFound(w, r)
			return
		}
		body, err := io.ReadAll(io.LimitReader(r.Body, server.BodySizeMaxDefault))
		var req api.AppendRequest
		if err == nil {
			err = json.Unmarshal(body, &req)
		}
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		res, err := db.Append(r.Context(), chain.Request{Chain: tenant + "/" + name, IdempotencyKey: r.Header.Get(api.HeaderIdempotencyKey),
			Type: req.Type, Payload: req.Payload})
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		e := res.Entry
		out, _ := json.Marshal(api.AppendResponse{Chain: name, Seq: e.Seq, Hash: e.Hash.String(), TimeUnixNano: e.TimeUnixNano})
		w.Header().Set("Content-Type", api.MediaJSON)
		w.WriteHeader(http.StatusCreated)
		_, _ = w.Write(append(out, '\n'))
	})
}
