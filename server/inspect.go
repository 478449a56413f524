package server

import (
	"encoding/binary"
	"encoding/hex"
	"errors"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/ledgerworks/ledger/api"
	"github.com/ledgerworks/ledger/apikey"
	"github.com/ledgerworks/ledger/audit"
	"github.com/ledgerworks/ledger/chain"
	"github.com/ledgerworks/ledger/idempotency"
	"github.com/ledgerworks/ledger/inbox"
)

// InboxRecentMax is how many of a provider's newest events GET /v1/inbox
// shows.
const InboxRecentMax = 20

// providerCounts are a provider's refusals since the server started.
type providerCounts struct {
	duplicates, reused, badSignatures atomic.Int64
}

// inspectRoutes are the read-only views an operator (and the console)
// uses beside the outbox's: the tenant's inbox and its guard records.
func (s *Server) inspectRoutes() []*Route {
	return []*Route{
		{Method: http.MethodGet, Path: "/v1/inbox", ID: "inbox.providers", Tag: "inbox", Scope: scopeAdmin,
			Summary:  "The tenant's webhook providers: events recorded, the newest ones, refusals since the server started",
			Response: api.InboxList{}, Status: http.StatusOK, read: s.listInbox},
		{Method: http.MethodGet, Path: "/v1/proofs/entry", ID: "proofs.entry", Tag: "entries", Scope: scopeRead,
			Summary:  "An entry's inclusion proof against the newest checkpoint the server signed (docs/PROOFS.md's entry proof file, which holds the checkpoint)",
			Response: map[string]any{}, Status: http.StatusOK, raw: s.proveEntry,
			Query: []Param{{"chain", "string", "the chain, relative to the tenant"}, {"seq", "int64", "the entry's seq"}}},
		{Method: http.MethodGet, Path: "/v1/idempotency/records", ID: "idempotency.records.get", Tag: "idempotency", Scope: scopeAdmin,
			Summary:  "The replay guard's record of one request of the tenant: state, attempts, stored response",
			Response: api.GuardRecord{}, Status: http.StatusOK, read: s.guardRecord,
			Query: []Param{{"key_id", "string", "the id of the API key that sent the request"},
				{"method", "string", "the request's method (POST or DELETE)"},
				{"path", "string", "the request's path, as sent (/v1/stock/receipts)"},
				{"key", "string", "the request's Idempotency-Key"}}},
	}
}

func (s *Server) listInbox(c *call) (any, error) {
	out := api.InboxList{Providers: []api.InboxProvider{}}
	var names []string
	for name, p := range s.providers {
		if p.Tenant == c.tenant {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	for _, name := range names {
		p := s.providers[name]
		full, err := inbox.Chain(p.Tenant, p.Name)
		if err != nil {
			return nil, err
		}
		ip := api.InboxProvider{Name: p.Name, Kind: p.Kind, Topic: p.Topic, Chain: c.rel(full), Recent: []api.InboxEvent{},
			Duplicates: p.counts.duplicates.Load(), EventIDReused: p.counts.reused.Load(), BadSignatures: p.counts.badSignatures.Load()}
		head, err := s.db.Head(c.ctx, full)
		if err != nil && !errors.Is(err, chain.ErrNotFound) {
			return nil, err
		}
		ip.Events, ip.LastEventUnixNano = head.Seq, head.TimeUnixNano
		if head.Seq > 0 {
			from := uint64(1)
			if head.Seq > InboxRecentMax {
				from = head.Seq - InboxRecentMax + 1
			}
			for e, err := range s.db.Entries(c.ctx, full, from) {
				if err != nil {
					return nil, err
				}
				if e.Seq > head.Seq {
					break
				}
				ev := api.InboxEvent{Seq: e.Seq, EventID: e.IdempotencyKey, TimeUnixNano: e.TimeUnixNano}
				// An event's payload: version 1, the body's digest, its size.
				if len(e.Payload) == 41 && e.Payload[0] == 1 {
					ev.BodyDigest, ev.BodySize = hex.EncodeToString(e.Payload[1:33]), binary.BigEndian.Uint64(e.Payload[33:])
				}
				ip.Recent = append(ip.Recent, ev)
			}
			slices.Reverse(ip.Recent)
		}
		out.Providers = append(out.Providers, ip)
	}
	return out, nil
}

// proveEntry answers the proof file of ledgerctl prove entry: Format v1's
// numbers stay numbers there, as in every export.
func (s *Server) proveEntry(c *call) {
	signed := s.checkpoint.Load()
	if signed == nil {
		s.problem(c.w, c.r, notFoundf("this server signs no checkpoint (serve --checkpoint-key)"))
		return
	}
	name := c.r.URL.Query().Get("chain")
	seq, _, err := c.uintQuery("seq", 0)
	if err == nil && (name == "" || seq == 0 || len(c.full(name)) > chain.ChainLengthMax) {
		err = invalidf("chain=%q seq=%d: want a chain of the tenant and a seq from 1", name, seq)
	}
	if err != nil {
		s.problem(c.w, c.r, err)
		return
	}
	p, err := audit.ProveEntry(c.ctx, s.db, *signed, "", c.full(name), seq)
	if err != nil {
		s.problem(c.w, c.r, err)
		return
	}
	b, err := p.Marshal()
	if err != nil {
		s.problem(c.w, c.r, err)
		return
	}
	c.w.Header().Set("Content-Type", api.MediaJSON)
	c.w.WriteHeader(http.StatusOK)
	c.w.Write(b) //nolint:errcheck // a client gone away is nothing to report
}

// keyCreatePath is the route whose stored answers hold a token.
const keyCreatePath = "/v1/apikeys"

func (s *Server) guardRecord(c *call) (any, error) {
	q := c.r.URL.Query()
	keyID, method, path, key := q.Get("key_id"), q.Get("method"), q.Get("path"), q.Get("key")
	if len(keyID) != apikey.KeyIDLength || strings.Trim(keyID, "0123456789abcdef") != "" {
		return nil, invalidf("key_id %q: want an API key id (%d lowercase hex digits)", keyID, apikey.KeyIDLength)
	}
	if method != http.MethodPost && method != http.MethodDelete {
		return nil, invalidf("method %q: want POST or DELETE", method)
	}
	if !strings.HasPrefix(path, "/v1/") || !utf8.ValidString(path) || strings.ContainsAny(path, "?# ") {
		return nil, invalidf("path %q: want the request's path under /v1/, without a query", path)
	}
	if key == "" || len(key) > idempotency.KeySizeMax {
		return nil, invalidf("key: want 1 to %d bytes", idempotency.KeySizeMax)
	}
	op := method + " " + path
	if len(op) > idempotency.OperationSizeMax {
		return nil, invalidf("path: longer than the guard's operations (%d bytes)", idempotency.OperationSizeMax)
	}
	// The user is the tenant's own: a key id of another tenant names no
	// record of this one.
	scope := idempotency.Scope{Operation: op, User: c.tenant + "/" + keyID, Key: key}
	rec, err := s.store.Get(c.ctx, scope, s.now())
	if errors.Is(err, idempotency.ErrNotFound) {
		return nil, notFoundf("no guard record of %s with key %q from key %s", op, key, keyID)
	}
	if err != nil {
		return nil, err
	}
	out := api.GuardRecord{Operation: op, KeyID: keyID, Key: key, Status: string(rec.Status), Attempt: rec.Attempt,
		RequestHash: hex.EncodeToString(rec.RequestHash[:]), CreatedUnixNano: unixNano(rec.CreatedAt),
		UpdatedUnixNano: unixNano(rec.UpdatedAt), LeaseExpiresUnixNano: unixNano(rec.LeaseExpiresAt),
		ExpiresUnixNano: unixNano(rec.ExpiresAt), Failure: rec.Failure}
	if r := rec.Response; r != nil {
		gr := &api.GuardResponse{Status: r.Status, Headers: map[string]string{}}
		for k, v := range r.Header {
			gr.Headers[k] = strings.Join(v, ", ")
		}
		if op == http.MethodPost+" "+keyCreatePath {
			gr.BodyWithheld = true
		} else {
			gr.Body = string(r.Body)
		}
		out.Response = gr
	}
	return out, nil
}

// unixNano is t in nanoseconds, 0 for the zero time.
func unixNano(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixNano()
}
