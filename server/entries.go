package server

import (
	"net/http"
	"strings"

	"github.com/ledgerworks/ledger/api"
	"github.com/ledgerworks/ledger/chain"
	"github.com/ledgerworks/ledger/financial"
	"github.com/ledgerworks/ledger/inbox"
	"github.com/ledgerworks/ledger/internal/wire"
	"github.com/ledgerworks/ledger/outbox"
	"github.com/ledgerworks/ledger/stockmovement"
	"github.com/ledgerworks/ledger/valuations"
)

// Limits of the entry routes.
const (
	// EntryPageLimitDefault is the entries a page holds without limit=.
	EntryPageLimitDefault = 100
	// EntryPageLimitMax bounds limit=.
	EntryPageLimitMax = 1000
	// ChainPageLimitDefault is the chains a page of GET /v1/chains holds
	// without limit=.
	ChainPageLimitDefault = 100
	// ChainPageLimitMax bounds limit= of GET /v1/chains.
	ChainPageLimitMax = 1000
)

// reservedDomains are the first components of the chains only their
// packages' routes write: a raw append there could break a domain's
// invariants, so it is refused and nothing is written.
var reservedDomains = map[string]bool{
	stockmovement.Domain: true, financial.Domain: true, valuations.Domain: true,
	outbox.Domain: true, inbox.Domain: true,
}

func (s *Server) entryRoutes() []*Route {
	const tag = "entries"
	return []*Route{
		{Method: http.MethodGet, Path: "/v1/chains", ID: "chains.list", Tag: tag, Scope: scopeRead,
			Summary: "List the tenant's chains whose names start with a prefix, with their heads", Response: api.ChainList{}, Status: http.StatusOK,
			Query: []Param{{"prefix", "string", "the names' prefix (default: every chain)"},
				{"from_name", "string", "the first name of the page, a previous page's next_from_name"},
				{"limit", "integer", "most chains (default 100, at most 1000)"}},
			read: listChains},
		{Method: http.MethodPost, Path: "/v1/chains/{name}/entries", ID: "entries.append", Tag: tag, Scope: scopeWrite, Guarded: true,
			Summary: "Append an entry to a chain of the tenant (not a domain chain: stock, fin, val, outbox, inbox)",
			Request: api.AppendRequest{}, Response: api.AppendResponse{}, Status: http.StatusCreated,
			write: appendEntry, pattern: "POST " + chainPrefix + "{rest...}"},
		{Method: http.MethodGet, Path: "/v1/chains/{name}/entries/{seq}", ID: "entries.get", Tag: tag, Scope: scopeRead,
			Summary: "Read one entry", Response: api.Entry{}, Status: http.StatusOK, read: getEntry,
			pattern: "GET " + chainPrefix + "{rest...}"},
		{Method: http.MethodGet, Path: "/v1/chains/{name}/entries", ID: "entries.list", Tag: tag, Scope: scopeRead,
			Summary: "Read a page of a chain's entries in seq order", Response: api.EntryPage{}, Status: http.StatusOK,
			Query: []Param{{"from", "int64", "first seq (default 1)"}, {"limit", "integer", "most entries (default 100, at most 1000)"}},
			read:  listEntries, pattern: "GET " + chainPrefix + "{rest...}"},
		{Method: http.MethodGet, Path: "/v1/chains/{name}/head", ID: "entries.head", Tag: tag, Scope: scopeRead,
			Summary: "Read a chain's head", Response: api.Head{}, Status: http.StatusOK, read: chainHead,
			pattern: "GET " + chainPrefix + "{rest...}"},
	}
}

// chainName checks a chain name relative to the tenant.
func (c *call) chainName() (string, error) {
	name := c.r.PathValue("name")
	if name == "" {
		return "", invalidf("a chain name is required")
	}
	full := c.full(name)
	if len(full) > chain.ChainLengthMax {
		return "", invalidf("chain %q: longer than %d bytes with its tenant", name, chain.ChainLengthMax-len(c.tenant)-1)
	}
	return full, nil
}

func appendEntry(c *call) (func(tx txn) (any, error), error) {
	full, err := c.chainName()
	if err != nil {
		return nil, err
	}
	name := c.r.PathValue("name")
	if first, _, _ := strings.Cut(name, chain.NameSeparator); reservedDomains[first] {
		return nil, invalidf("chain %q: %s chains are written only through their own routes", name, first)
	}
	var req api.AppendRequest
	if err := c.decodeAppend(&req); err != nil {
		return nil, err
	}
	r := chain.Request{Chain: full, IdempotencyKey: c.op(), Type: req.Type, Payload: req.Payload}
	if r.Payload == nil {
		r.Payload = []byte{}
	}
	if err := chain.ValidateRequest(r, 0); err != nil {
		return nil, err
	}
	// On PostgreSQL the group commit locks the chain's head with its
	// group's others, in one global order, before running the function.
	c.ctx = chain.WithPlannedAppends(c.ctx, r)
	return func(tx txn) (any, error) {
		res, err := tx.Append(r)
		if err != nil {
			return nil, err
		}
		e := res.Entry
		return api.AppendResponse{Chain: c.rel(e.Chain), Seq: e.Seq, Hash: e.Hash.String(), TimeUnixNano: e.TimeUnixNano}, nil
	}, nil
}

// listChains reads the heads of the tenant's chains under a prefix, in
// pages: the names are scanned from max(prefix, from) and the scan stops
// at the first name outside the prefix, so a page costs its own chains.
func listChains(c *call) (any, error) {
	q := c.r.URL.Query()
	prefix, from := q.Get("prefix"), q.Get("from_name")
	limit, _, err := c.uintQuery("limit", ChainPageLimitDefault)
	if err != nil {
		return nil, err
	}
	if limit == 0 || limit > ChainPageLimitMax {
		return nil, invalidf("limit=%d: want 1 to %d", limit, ChainPageLimitMax)
	}
	if len(c.full(prefix)) > chain.ChainLengthMax || len(c.full(from)) > chain.ChainLengthMax {
		return nil, invalidf("prefix or from_name: longer than a chain name")
	}
	if from != "" && !strings.HasPrefix(from, prefix) {
		return nil, invalidf("from_name %q: not under prefix %q", from, prefix)
	}
	start := c.full(max(prefix, from))
	out := api.ChainList{Chains: []api.Head{}}
	for h, err := range c.s.db.Chains(c.ctx, start) {
		if err != nil {
			return nil, err
		}
		if !strings.HasPrefix(h.Chain, c.full(prefix)) {
			break
		}
		if uint64(len(out.Chains)) == limit {
			out.NextFromName = c.rel(h.Chain)
			break
		}
		out.Chains = append(out.Chains, api.Head{Chain: c.rel(h.Chain), Seq: h.Seq, Hash: h.Hash.String(), TimeUnixNano: h.TimeUnixNano})
	}
	return out, nil
}

func (c *call) entry(e chain.Entry) api.Entry {
	out := wire.Entry(e)
	out.Chain = c.rel(out.Chain)
	return out
}

func getEntry(c *call) (any, error) {
	full, err := c.chainName()
	if err != nil {
		return nil, err
	}
	seq, err := c.pathUint("seq")
	if err != nil {
		return nil, err
	}
	e, err := c.s.db.Get(c.ctx, full, seq)
	if err != nil {
		return nil, err
	}
	return c.entry(e), nil
}

func listEntries(c *call) (any, error) {
	full, err := c.chainName()
	if err != nil {
		return nil, err
	}
	from, _, err := c.uintQuery("from", 1)
	if err != nil {
		return nil, err
	}
	limit, _, err := c.uintQuery("limit", EntryPageLimitDefault)
	if err != nil {
		return nil, err
	}
	if from == 0 || limit == 0 || limit > EntryPageLimitMax {
		return nil, invalidf("from=%d limit=%d: seqs start at 1; limit is 1 to %d", from, limit, EntryPageLimitMax)
	}
	head, err := c.s.db.Head(c.ctx, full)
	if err != nil {
		return nil, err
	}
	page := api.EntryPage{Chain: c.rel(full), Entries: []api.Entry{}}
	if from > head.Seq {
		return page, nil
	}
	// One read transaction, entry by entry: the page, not the chain, is
	// what the server holds, and it ends before the entry that would take
	// its encoding past ResponseSizeMax.
	size := 0
	err = c.s.db.View(c.ctx, func(tx *chain.Tx) error {
		page.Entries = page.Entries[:0]
		size = 0
		for e, err := range tx.Entries(full, from) {
			if err != nil {
				return err
			}
			n := entryEncodedSizeMax(e)
			if len(page.Entries) > 0 && size+n > ResponseSizeMax {
				break
			}
			size += n
			page.Entries = append(page.Entries, c.entry(e))
			if uint64(len(page.Entries)) == limit {
				break
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if n := len(page.Entries); n > 0 && page.Entries[n-1].Seq < head.Seq {
		page.NextSeq = page.Entries[n-1].Seq + 1
	}
	return page, nil
}

// entryEncodedSizeMax is at least the bytes e takes in a page's JSON: its
// payload in base64, its strings at six bytes a byte (\u00XX), and 512 for
// its hashes, numbers, time and member names.
func entryEncodedSizeMax(e chain.Entry) int {
	return (len(e.Payload)+2)/3*4 + 6*(len(e.Chain)+len(e.IdempotencyKey)+len(e.Type)) + 512
}

func chainHead(c *call) (any, error) {
	full, err := c.chainName()
	if err != nil {
		return nil, err
	}
	h, err := c.s.db.Head(c.ctx, full)
	if err != nil {
		return nil, err
	}
	out := wire.Head(h)
	out.Chain = c.rel(out.Chain)
	return out, nil
}
