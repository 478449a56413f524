package server

import (
	"net/http"
	"time"

	"github.com/ledgerworks/ledger/api"
	"github.com/ledgerworks/ledger/internal/wire"
	"github.com/ledgerworks/ledger/outbox"
)

func (s *Server) outboxRoutes() []*Route {
	const tag = "outbox"
	return []*Route{
		{Method: http.MethodGet, Path: "/v1/outbox/messages", ID: "outbox.messages.list", Tag: tag, Scope: scopeAdmin,
			Summary:  "The tenant's messages in topic and enqueue order (pending, leased and dead unless status= says)",
			Response: api.OutboxMessageList{}, Status: http.StatusOK, read: outboxMessages,
			Query: []Param{{"topic", "string", "only this topic"}, {"status", "string", "pending, leased, dead or done"},
				{"limit", "integer", "most messages (default 1000)"}}},
		{Method: http.MethodGet, Path: "/v1/outbox/messages/{id}", ID: "outbox.messages.get", Tag: tag, Scope: scopeAdmin,
			Summary:  "A message with its headers, payload and whole delivery history (leases, outcomes, dead letters, requeues)",
			Response: api.OutboxMessageHistory{}, Status: http.StatusOK, read: outboxMessage},
		{Method: http.MethodGet, Path: "/v1/outbox/dead", ID: "outbox.dead.list", Tag: tag, Scope: scopeAdmin,
			Summary: "The dead letters, with their headers and payloads, a page at a time", Response: api.OutboxMessageList{},
			Status: http.StatusOK, read: outboxDead, Query: []Param{{"topic", "string", "only this topic"},
				{"from", "string", "the first dead letter of the page: a previous page's next_from"}}},
		{Method: http.MethodGet, Path: "/v1/outbox/stats", ID: "outbox.stats", Tag: tag, Scope: scopeAdmin,
			Summary:  "Messages by status per topic, with the ordering keys a failing message blocks",
			Response: api.OutboxStats{}, Status: http.StatusOK, read: outboxStats,
			Query: []Param{{"topic", "string", "only this topic"}}},
		{Method: http.MethodGet, Path: "/v1/outbox/activity", ID: "outbox.activity", Tag: tag, Scope: scopeAdmin,
			Summary:  "Delivered, failed and rejected attempts per topic in twelve equal buckets of the last minutes",
			Response: api.OutboxActivity{}, Status: http.StatusOK, read: outboxActivity,
			Query: []Param{{"topic", "string", "one topic (default: every topic of the tenant)"},
				{"minutes", "int64", "the window in minutes (default 60, at most 1440)"}}},
		{Method: http.MethodPost, Path: "/v1/outbox/requeue", ID: "outbox.requeue", Tag: tag, Scope: scopeAdmin, Guarded: true,
			Summary: "Return dead messages to pending with fresh attempts; recorded with the key's id as the operator",
			Request: api.OutboxRequeueRequest{}, Response: api.OutboxRequeueResponse{}, Status: http.StatusOK, write: outboxRequeue},
	}
}

func outboxMessages(c *call) (any, error) {
	q := c.r.URL.Query()
	o := outbox.ListOptions{Topic: q.Get("topic")}
	if st := q.Get("status"); st != "" {
		found := false
		for _, s := range []outbox.Status{outbox.Pending, outbox.Leased, outbox.Done, outbox.Dead} {
			if st == s.String() {
				o.Status, found = s, true
			}
		}
		if !found {
			return nil, invalidf("status=%q: want pending, leased, dead or done", st)
		}
	}
	limit, _, err := c.uintQuery("limit", outbox.ListLimitDefault)
	if err != nil {
		return nil, err
	}
	if limit == 0 || limit > outbox.ListLimitDefault {
		return nil, invalidf("limit=%d: want 1 to %d", limit, outbox.ListLimitDefault)
	}
	o.Limit = int(limit)
	infos, err := outbox.List(c.ctx, c.s.db, c.tenant, o)
	if err != nil {
		return nil, err
	}
	return messageList(infos, false), nil
}

func outboxMessage(c *call) (any, error) {
	id, err := outbox.ParseID(c.r.PathValue("id"))
	if err != nil {
		return nil, invalidf("%q is not a message id (32 hex digits, or outbox:<id>)", c.r.PathValue("id"))
	}
	info, err := outbox.Get(c.ctx, c.s.db, c.tenant, id)
	if err != nil {
		return nil, err
	}
	out := api.OutboxMessageHistory{Message: wire.OutboxMessage(info, true), History: []api.OutboxEvent{}}
	for ev, err := range outbox.History(c.ctx, c.s.db, c.tenant, id) {
		if err != nil {
			return nil, err
		}
		out.History = append(out.History, wire.OutboxEvent(ev))
	}
	return out, nil
}

func messageList(infos []outbox.Info, withBody bool) api.OutboxMessageList {
	out := api.OutboxMessageList{Messages: []api.OutboxMessage{}}
	for _, i := range infos {
		out.Messages = append(out.Messages, wire.OutboxMessage(i, withBody))
	}
	return out
}

// outboxDead answers a page of dead letters, which ends before the one
// that would take it past ResponseSizeMax, with next_from.
func outboxDead(c *call) (any, error) {
	q := c.r.URL.Query()
	o := outbox.DeadOptions{Topic: q.Get("topic")}
	if from := q.Get("from"); from != "" {
		id, err := outbox.ParseID(from)
		if err != nil {
			return nil, invalidf("from=%q is not a message id (32 hex digits, or outbox:<id>)", from)
		}
		o.From = id
	}
	size := 0
	o.Fits = func(i outbox.Info) bool {
		size += len(marshal(wire.OutboxMessage(i, true))) + 1 // and its comma
		return size <= ResponseSizeMax
	}
	infos, next, err := outbox.ListDeadPage(c.ctx, c.s.db, c.tenant, o)
	if err != nil {
		return nil, err
	}
	out := messageList(infos, true)
	if next != (outbox.ID{}) {
		out.NextFrom = next.String()
	}
	return out, nil
}

func outboxStats(c *call) (any, error) {
	stats, err := outbox.Stats(c.ctx, c.s.db, c.tenant, c.r.URL.Query().Get("topic"))
	if err != nil {
		return nil, err
	}
	out := api.OutboxStats{Topics: []api.OutboxTopic{}}
	for _, st := range stats {
		out.Topics = append(out.Topics, wire.OutboxTopic(st))
	}
	return out, nil
}

// Limits of GET /v1/outbox/activity.
const (
	// OutboxActivityMinutesMax bounds minutes=.
	OutboxActivityMinutesMax = 1440
	// OutboxActivityBuckets is how many buckets the window is cut into.
	OutboxActivityBuckets = 12
)

func outboxActivity(c *call) (any, error) {
	minutes, _, err := c.uintQuery("minutes", 60)
	if err != nil {
		return nil, err
	}
	if minutes == 0 || minutes > OutboxActivityMinutesMax {
		return nil, invalidf("minutes=%d: want 1 to %d", minutes, OutboxActivityMinutesMax)
	}
	stats, err := outbox.Stats(c.ctx, c.s.db, c.tenant, c.r.URL.Query().Get("topic"))
	if err != nil {
		return nil, err
	}
	width := time.Duration(minutes) * time.Minute / OutboxActivityBuckets
	since := c.s.now().Add(-time.Duration(minutes) * time.Minute)
	out := api.OutboxActivity{Topics: []api.OutboxTopicActivity{}}
	for _, st := range stats {
		rep, err := outbox.Activity(c.ctx, c.s.db, c.tenant, st.Topic, since, width, OutboxActivityBuckets)
		if err != nil {
			return nil, err
		}
		ta := api.OutboxTopicActivity{Topic: st.Topic, BucketSeconds: int64(width / time.Second), Truncated: rep.Truncated,
			Buckets: make([]api.OutboxBucket, len(rep.Buckets))}
		for i, b := range rep.Buckets {
			ta.Buckets[i] = api.OutboxBucket{StartUnixNano: b.Start.UnixNano(), Delivered: b.Delivered, Failed: b.Failed, Rejected: b.Rejected}
		}
		out.Topics = append(out.Topics, ta)
	}
	return out, nil
}

func outboxRequeue(c *call) (func(tx txn) (any, error), error) {
	var req api.OutboxRequeueRequest
	if err := c.decode(&req); err != nil {
		return nil, err
	}
	if len(req.IDs) == 0 || len(req.IDs) > outbox.OutcomeBatchMax {
		return nil, invalidf("ids: want 1 to %d message ids", outbox.OutcomeBatchMax)
	}
	// An id listed twice is requeued, and reported, once.
	ids := make([]outbox.ID, 0, len(req.IDs))
	seen := make(map[outbox.ID]bool, len(req.IDs))
	for _, s := range req.IDs {
		id, err := outbox.ParseID(s)
		if err != nil {
			return nil, invalidf("%q is not a message id (32 hex digits, or outbox:<id>)", s)
		}
		if !seen[id] {
			seen[id] = true
			ids = append(ids, id)
		}
	}
	operator := "apikey:" + c.key.ID
	return func(tx txn) (any, error) {
		if err := outbox.RequeueTx(tx, c.tenant, ids, outbox.RequeueOptions{Operator: operator, Reason: req.Reason}); err != nil {
			return nil, err
		}
		out := api.OutboxRequeueResponse{Requeued: []string{}, Operator: operator}
		for _, id := range ids {
			out.Requeued = append(out.Requeued, id.String())
		}
		return out, nil
	}, nil
}
