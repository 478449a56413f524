package server

import (
	"context"
	"errors"
	"net/http"
	"strings"

	"github.com/ledgerworks/ledger/api"
	"github.com/ledgerworks/ledger/apikey"
	"github.com/ledgerworks/ledger/chain"
	"github.com/ledgerworks/ledger/internal/buildinfo"
	"github.com/ledgerworks/ledger/internal/wire"
)

// Scopes of the routes.
const (
	scopeRead  = apikey.ScopeRead
	scopeWrite = apikey.ScopeWrite
	scopeAdmin = apikey.ScopeAdmin
)

// VerifyChainsMax bounds the chains one POST /v1/verify checks, and
// VerifyExpectHeadsMax the saved heads it compares.
const (
	VerifyChainsMax      = 100_000
	VerifyExpectHeadsMax = 10_000
)

func (s *Server) adminRoutes() []*Route {
	return []*Route{
		{Method: http.MethodPost, Path: "/v1/apikeys", ID: "apikeys.create", Tag: "api keys", Scope: scopeAdmin, Guarded: true,
			Summary: "Create a key of the caller's tenant with scopes the caller holds; its token is shown in this answer only",
			Request: api.APIKeyRequest{}, Response: api.APIKeyCreated{}, Status: http.StatusCreated, raw: createKey},
		{Method: http.MethodGet, Path: "/v1/whoami", ID: "apikeys.whoami", Tag: "api keys", Scope: scopeRead,
			Summary:  "The calling key's public record: its tenant and scopes (what the console shows and offers)",
			Response: api.APIKey{}, Status: http.StatusOK, read: whoami},
		{Method: http.MethodGet, Path: "/v1/apikeys", ID: "apikeys.list", Tag: "api keys", Scope: scopeAdmin,
			Summary: "The tenant's keys (never their secrets)", Response: api.APIKeyList{}, Status: http.StatusOK, read: listKeys},
		{Method: http.MethodDelete, Path: "/v1/apikeys/{id}", ID: "apikeys.revoke", Tag: "api keys", Scope: scopeAdmin, Guarded: true,
			Summary: "Revoke a key of the tenant whose scopes the caller holds", Response: api.APIKey{}, Status: http.StatusOK, raw: revokeKey,
			Query: []Param{{"reason", "string", "why the key is revoked (recorded)"}}},
		{Method: http.MethodPost, Path: "/v1/verify", ID: "verify", Tag: "verify", Scope: scopeAdmin,
			Summary: "Verify the hashes and links of the tenant's chains, optionally their trees and saved heads (writes nothing)",
			Request: api.VerifyRequest{}, Response: api.VerifyReport{}, Status: http.StatusOK, read: verify},
	}
}

func (s *Server) systemRoutes() []*Route {
	return []*Route{
		{Method: http.MethodGet, Path: "/healthz", ID: "healthz", Tag: "system", Summary: "The process answers, with its build's version",
			Response: api.Health{}, Status: http.StatusOK, raw: func(c *call) {
				writeJSON(c.w, http.StatusOK, api.Health{Status: "ok", Version: &buildVersion})
			}},
		{Method: http.MethodGet, Path: "/readyz", ID: "readyz", Tag: "system",
			Summary:  "The server is started, not draining, and its ledger answers (else 503)",
			Response: api.Health{}, Status: http.StatusOK, raw: s.readyz},
		{Method: http.MethodGet, Path: "/openapi.json", ID: "openapi", Tag: "system", Summary: "This OpenAPI 3.1 document",
			Response: map[string]any{}, Status: http.StatusOK, raw: s.serveOpenAPI},
	}
}

// buildVersion is the running build, reported by GET /healthz.
var buildVersion = buildinfo.Get()

func (s *Server) readyz(c *call) {
	status, detail := "ok", ""
	switch {
	case s.draining.Load():
		status, detail = "not_ready", "shutting down"
	case !s.ready.Load():
		status, detail = "not_ready", "starting"
	default:
		if _, err := s.db.Head(c.ctx, "readyz"); err != nil && !errors.Is(err, chain.ErrNotFound) {
			status, detail = "not_ready", "the ledger does not answer"
		}
	}
	code := http.StatusOK
	if status != "ok" {
		code = http.StatusServiceUnavailable
	}
	writeJSON(c.w, code, api.Health{Status: status, Detail: detail})
}

func apiKey(k apikey.Key) api.APIKey {
	out := api.APIKey{ID: k.ID, Tenant: k.Tenant, Name: k.Name, Scopes: []string{}, CreatedUnixNano: k.CreatedUnixNano,
		RevokedUnixNano: k.RevokedUnixNano}
	for _, sc := range k.Scopes {
		out.Scopes = append(out.Scopes, string(sc))
	}
	return out
}

// createKey runs behind its own guard (Server.keyGuard), whose records
// (which hold the token a retry gets back) expire after KeyReplayTTL.
func createKey(c *call) {
	var req api.APIKeyRequest
	if err := c.decode(&req); err != nil {
		c.s.problem(c.w, c.r, err)
		return
	}
	scopes := make([]apikey.Scope, 0, len(req.Scopes))
	for _, sc := range req.Scopes {
		scopes = append(scopes, apikey.Scope(sc))
	}
	// By: the new key's scopes must be the caller's (403 SCOPE_NOT_HELD).
	k, token, err := apikey.Create(c.ctx, c.s.db, apikey.CreateRequest{Tenant: c.tenant, Name: req.Name, Scopes: scopes, By: c.key.ID})
	if err != nil {
		c.s.problem(c.w, c.r, err)
		return
	}
	writeJSON(c.w, http.StatusCreated, api.APIKeyCreated{Key: apiKey(k), Token: token})
}

func whoami(c *call) (any, error) { return apiKey(c.key), nil }

func listKeys(c *call) (any, error) {
	keys, err := apikey.List(c.ctx, c.s.db, c.tenant)
	if err != nil {
		return nil, err
	}
	out := api.APIKeyList{Keys: []api.APIKey{}}
	for _, k := range keys {
		out.Keys = append(out.Keys, apiKey(k))
	}
	return out, nil
}

func revokeKey(c *call) {
	id := c.r.PathValue("id")
	keys, err := apikey.List(c.ctx, c.s.db, c.tenant)
	if err != nil {
		c.s.problem(c.w, c.r, err)
		return
	}
	found := false
	for _, k := range keys {
		found = found || k.ID == id
	}
	if !found { // another tenant's key is not this tenant's to name
		c.s.problem(c.w, c.r, notFoundf("the tenant has no key %q", id))
		return
	}
	// By: the caller must hold every scope of the key it revokes.
	k, err := apikey.RevokeIn(c.ctx, c.s.db, apikey.RevokeRequest{Tenant: c.tenant, ID: id, Reason: c.r.URL.Query().Get("reason"), By: c.key.ID})
	if err != nil {
		c.s.problem(c.w, c.r, err)
		return
	}
	writeJSON(c.w, http.StatusOK, apiKey(k))
}

func verify(c *call) (any, error) {
	var req api.VerifyRequest
	if c.r.ContentLength != 0 {
		if err := c.decode(&req); err != nil {
			return nil, err
		}
	}
	opts, err := c.verifyOptions(req)
	if err != nil {
		return nil, err
	}
	if len(req.Chains) == 0 {
		if opts.Chains, err = tenantChains(c.ctx, c.s.db, c.tenant); err != nil {
			return nil, err
		}
	}
	// Every chain of a saved head is verified, and named, so that the
	// engine never widens the check beyond the tenant.
	named := make(map[string]bool, len(opts.Chains))
	for _, name := range opts.Chains {
		named[name] = true
	}
	for _, h := range opts.ExpectHeads {
		if !named[h.Chain] {
			named[h.Chain] = true
			opts.Chains = append(opts.Chains, h.Chain)
		}
	}
	out := api.VerifyReport{OK: true, Failures: []api.VerifyFailure{}}
	if len(opts.Chains) == 0 {
		return out, nil
	}
	rep, err := c.s.db.Verify(c.ctx, opts)
	if err != nil {
		return nil, err
	}
	out = wire.VerifyReport(&rep)
	for i := range out.Failures {
		out.Failures[i].Chain = c.rel(out.Failures[i].Chain)
	}
	return out, nil
}

// verifyOptions checks a verify request and names its chains and heads in
// full, within the tenant.
func (c *call) verifyOptions(req api.VerifyRequest) (chain.VerifyOptions, error) {
	opts := chain.VerifyOptions{Trees: req.Trees}
	if len(req.Chains) > VerifyChainsMax {
		return opts, invalidf("chains: %d named, at most %d", len(req.Chains), VerifyChainsMax)
	}
	if len(req.ExpectHeads) > VerifyExpectHeadsMax {
		return opts, invalidf("expect_heads: %d given, at most %d", len(req.ExpectHeads), VerifyExpectHeadsMax)
	}
	for i, name := range req.Chains {
		if name == "" {
			return opts, invalidf("chains[%d]: empty chain name", i)
		}
		opts.Chains = append(opts.Chains, c.full(name))
	}
	for i, h := range req.ExpectHeads {
		if h.Chain == "" {
			return opts, invalidf("expect_heads[%d]: empty chain name", i)
		}
		hash, err := chain.ParseHash(h.Hash)
		if err != nil {
			return opts, invalidf("expect_heads[%d]: %v", i, err)
		}
		opts.ExpectHeads = append(opts.ExpectHeads, chain.Head{Chain: c.full(h.Chain), Seq: h.Seq, Hash: hash})
	}
	return opts, nil
}

// tenantChains lists the chains whose names begin with the tenant.
func tenantChains(ctx context.Context, db *chain.DB, tenant string) ([]string, error) {
	prefix := tenant + chain.NameSeparator
	var out []string
	for h, err := range db.Chains(ctx, prefix) {
		if err != nil {
			return nil, err
		}
		if !strings.HasPrefix(h.Chain, prefix) {
			break
		}
		if len(out) == VerifyChainsMax {
			return nil, invalidf("the tenant has more than %d chains: name the chains to verify", VerifyChainsMax)
		}
		out = append(out, h.Chain)
	}
	return out, nil
}
