// Package wire converts the engine's and the domain packages' values into
// the api package's wire types. The command line's JSON output and the HTTP
// API's bodies are built by these same functions, so both show a value in
// one shape. Chain names are the ledger's full names here; the server makes
// them relative to the caller's tenant.
package wire

import (
	"time"

	"github.com/ledgerworks/ledger/api"
	"github.com/ledgerworks/ledger/chain"
	"github.com/ledgerworks/ledger/financial"
	"github.com/ledgerworks/ledger/outbox"
	"github.com/ledgerworks/ledger/stockmovement"
	"github.com/ledgerworks/ledger/valuations"
)

// Entry is a chain entry.
func Entry(e chain.Entry) api.Entry {
	return api.Entry{Chain: e.Chain, Seq: e.Seq, TimeUnixNano: e.TimeUnixNano,
		Time: time.Unix(0, e.TimeUnixNano).UTC().Format(time.RFC3339Nano), IdempotencyKey: e.IdempotencyKey,
		Type: e.Type, Payload: e.Payload, PrevHash: e.PrevHash.String(), Hash: e.Hash.String()}
}

// Head is a chain's head.
func Head(h chain.Head) api.Head {
	return api.Head{Chain: h.Chain, Seq: h.Seq, Hash: h.Hash.String(), TimeUnixNano: h.TimeUnixNano}
}

// StockItem is an item of a tenant's stock catalog.
func StockItem(tenant string, it stockmovement.DefinedItem) api.StockItem {
	return api.StockItem{Tenant: tenant, ID: it.ID, Name: it.Name, Scale: it.Scale, AllowNegative: it.AllowNegative,
		Seq: it.Seq, Unchanged: it.Unchanged}
}

// StockLocation is a location of a tenant's stock catalog.
func StockLocation(tenant string, l stockmovement.DefinedLocation) api.StockLocation {
	return api.StockLocation{Tenant: tenant, ID: l.ID, Name: l.Name, Seq: l.Seq, Unchanged: l.Unchanged}
}

// StockEntry is a movement entry.
func StockEntry(e stockmovement.Entry) api.StockEntry {
	return api.StockEntry{Tenant: e.Tenant, Item: e.Item, Location: e.Location, Chain: e.Chain, Seq: e.Seq,
		TimeUnixNano: e.TimeUnixNano, IdempotencyKey: e.IdempotencyKey, Kind: e.Kind.String(),
		Quantity: e.Quantity.String(), Balance: e.Balance.String(), Reference: e.Reference, Note: e.Note,
		Reason: e.Reason, Counterpart: e.Counterpart, OriginalChain: e.OriginalChain, OriginalSeq: e.OriginalSeq}
}

// StockResult is a movement's entries.
func StockResult(res stockmovement.Result) api.StockResult {
	out := api.StockResult{Replayed: res.Replayed, Entries: make([]api.StockEntry, 0, len(res.Entries))}
	for _, e := range res.Entries {
		out.Entries = append(out.Entries, StockEntry(e))
	}
	return out
}

// StockBalance is one balance.
func StockBalance(b stockmovement.Balance) api.StockBalance {
	return api.StockBalance{Tenant: b.Tenant, Item: b.Item, Location: b.Location, Quantity: b.Quantity.String(),
		Seq: b.Seq, TimeUnixNano: b.TimeUnixNano}
}

// ValItem is a valued item.
func ValItem(it valuations.Item) api.ValItem {
	return api.ValItem{Tenant: it.Tenant, ID: it.ID, Method: it.Method.String(), QuantityScale: it.QuantityScale,
		Currency: it.Currency, MinorUnit: it.MinorUnit, AllowNegative: it.AllowNegative}
}

// ValResult is what a valuation operation did.
func ValResult(tenant, item string, res valuations.Result) api.ValResult {
	out := api.ValResult{Tenant: tenant, Item: item, Operation: res.OperationID, Replayed: res.Replayed, Legs: []api.ValLeg{}}
	for _, leg := range res.Legs {
		l := api.ValLeg{Location: leg.Location, QuantityChain: leg.QuantityEntry.Chain, QuantitySeq: leg.QuantityEntry.Seq,
			ValueChain: leg.ValueEntry.Chain, ValueSeq: leg.ValueEntry.Seq, QuantityChange: leg.QuantityChange.String(),
			ValueChange: leg.ValueChange.String(), Quantity: leg.Quantity.String(), Value: leg.Value.String()}
		if leg.RateKnown {
			l.Rate = leg.Rate.String()
		}
		for _, st := range leg.Settlements {
			l.Settlements = append(l.Settlements, api.ValSettlement{Operation: st.OperationID, Quantity: st.Quantity.String(),
				Estimated: st.Estimated.String(), Actual: st.Actual.String(), Correction: st.Correction.String()})
		}
		out.Legs = append(out.Legs, l)
	}
	return out
}

// ValBalance is the valuation of an item at a location.
func ValBalance(b valuations.Balance) api.ValBalance {
	out := api.ValBalance{Tenant: b.Tenant, Item: b.Item, Location: b.Location, Method: b.Method.String(),
		Quantity: b.Quantity.String(), Value: b.Value.String(), QuantitySeq: b.QuantitySeq, ValueSeq: b.ValueSeq}
	if b.RateKnown {
		out.Rate = b.Rate.String()
	}
	for _, p := range b.Pending {
		out.Pending = append(out.Pending, api.ValPending{Operation: p.OperationID, Quantity: p.Quantity.String(), Estimate: p.Estimate.String()})
	}
	return out
}

// ValLayer is an open FIFO layer.
func ValLayer(l valuations.Layer) api.ValLayer {
	return api.ValLayer{Number: l.Number, ID: l.ID, Quantity: l.Quantity.String(), Value: l.Value.String()}
}

// FinAccount is an account of a book.
func FinAccount(b *financial.Book, acc financial.Account) api.FinAccount {
	return api.FinAccount{Tenant: b.Tenant(), Book: b.Name(), Code: acc.Code, Name: acc.Name, Type: acc.Type.String(),
		NormalSide: acc.NormalSide.String(), Closed: acc.Closed, DefinedSeq: acc.DefinedSeq, ClosedSeq: acc.ClosedSeq}
}

// FinAccountResult is the account a definition or a close wrote (or found).
func FinAccountResult(b *financial.Book, res financial.AccountResult) api.FinAccount {
	out := FinAccount(b, res.Account)
	out.Seq, out.Replayed = res.Seq, res.Replayed
	return out
}

// FinCurrency is a currency of a book.
func FinCurrency(b *financial.Book, c financial.Currency, replayed bool) api.FinCurrency {
	return api.FinCurrency{Tenant: b.Tenant(), Book: b.Name(), Code: c.Code, Exponent: c.Exponent,
		DefinedSeq: c.DefinedSeq, Replayed: replayed}
}

// PostingLines are a posting's lines.
func PostingLines(lines []financial.Line) []api.PostingLine {
	out := make([]api.PostingLine, 0, len(lines))
	for _, l := range lines {
		out = append(out, api.PostingLine{Account: l.Account, Side: l.Side.String(), Amount: l.Amount.String(), Currency: l.Currency})
	}
	return out
}

// FinPosting is a posting of a book's journal.
func FinPosting(b *financial.Book, res financial.PostingResult) api.FinPosting {
	p := res.Posting
	return api.FinPosting{Tenant: b.Tenant(), Book: b.Name(), Journal: b.Journal(), Seq: res.Seq, TimeUnixNano: res.TimeUnixNano,
		Hash: res.Hash.String(), Key: p.Key, Date: p.Date.String(), Memo: p.Memo, Reference: p.Reference, Reverses: p.Reverses,
		Lines: PostingLines(p.Lines), Replayed: res.Replayed}
}

// FinBalance is an account's balance in one currency.
func FinBalance(b *financial.Book, bal financial.Balance) api.FinBalance {
	out := api.FinBalance{Tenant: b.Tenant(), Book: b.Name(), Account: bal.Account, Currency: bal.Currency,
		Amount: bal.Amount.String(), Normal: bal.Normal.String(), NormalSide: bal.NormalSide.String(),
		Postings: bal.Postings, Seq: bal.Seq}
	if bal.Date != nil {
		out.Date = bal.Date.String()
	}
	return out
}

// FinTrialBalance is a book's trial balance.
func FinTrialBalance(b *financial.Book, tb financial.TrialBalance) api.FinTrialBalance {
	out := api.FinTrialBalance{Tenant: b.Tenant(), Book: b.Name(), Seq: tb.Seq, Rows: []api.FinBalance{}, Totals: []api.CurrencyTotal{}}
	for _, bal := range tb.Rows {
		out.Rows = append(out.Rows, FinBalance(b, bal))
	}
	for _, t := range tb.Totals {
		out.Totals = append(out.Totals, api.CurrencyTotal{Currency: t.Currency, Debit: t.Debit.String(), Credit: t.Credit.String(), Net: t.Net.String()})
	}
	return out
}

// OutboxMessage is a message and its delivery state; withBody adds its
// headers and payload.
func OutboxMessage(i outbox.Info, withBody bool) api.OutboxMessage {
	m := api.OutboxMessage{ID: i.Message.ID.String(), Key: i.Message.Key, Topic: i.Message.Topic, IdempotencyKey: i.Message.IdempotencyKey,
		OrderingKey: i.Message.OrderingKey, Status: i.Status.String(), Attempts: i.Attempts, DueUnixNano: i.Due.UnixNano(),
		Worker: i.Worker, Token: i.Token, EnqueuedAt: i.Message.EnqueuedAt.UnixNano(), Seq: i.Message.Seq}
	if withBody {
		m.Headers = map[string]string{}
		for _, h := range i.Message.Headers {
			m.Headers[h.Name] = h.Value
		}
		m.Payload = string(i.Message.Payload)
	}
	return m
}

// OutboxTopic counts a topic's messages.
func OutboxTopic(s outbox.TopicStats) api.OutboxTopic {
	t := api.OutboxTopic{Topic: s.Topic, Enqueued: s.Enqueued, Pending: s.Pending, Waiting: s.Waiting, Leased: s.Leased,
		Done: s.Done, Dead: s.Dead, Deliveries: s.Deliveries, BlockedKeys: []api.OutboxBlockedKey{}}
	if !s.OldestPending.IsZero() {
		t.OldestPending = s.OldestPending.UnixNano()
	}
	for _, k := range s.BlockedKeys {
		t.BlockedKeys = append(t.BlockedKeys, api.OutboxBlockedKey{OrderingKey: k.OrderingKey, Message: k.Message.String(),
			Status: k.Status.String(), Attempts: k.Attempts, Behind: k.Behind})
	}
	return t
}

// VerifyReport is a verification's report.
func VerifyReport(r *chain.Report) api.VerifyReport {
	out := api.VerifyReport{OK: r.OK(), Chains: r.Chains, Entries: r.Entries, Failures: []api.VerifyFailure{}, Truncated: r.Truncated}
	var zero chain.Hash
	for _, f := range r.Failures {
		vf := api.VerifyFailure{Chain: f.Chain, Seq: f.Seq, Reason: string(f.Reason), Detail: f.Detail}
		if f.Expected != zero {
			vf.Expected = f.Expected.String()
		}
		if f.Calculated != zero {
			vf.Calculated = f.Calculated.String()
		}
		out.Failures = append(out.Failures, vf)
	}
	return out
}

// OutboxEvent is one step of a message's delivery history.
func OutboxEvent(ev outbox.Event) api.OutboxEvent {
	j := api.OutboxEvent{Seq: ev.Seq, TimeUnixNano: ev.Time.UnixNano(), Type: ev.Type, Worker: ev.Worker, Attempt: ev.Attempt,
		Token: ev.Token, Detail: ev.Detail, DurationNano: int64(ev.Duration)}
	if !ev.Deadline.IsZero() {
		j.Deadline = ev.Deadline.UnixNano()
	}
	if ev.Outcome != 0 {
		j.Outcome = ev.Outcome.String()
	}
	if !ev.NextAttempt.IsZero() {
		j.NextAttempt = ev.NextAttempt.UnixNano()
	}
	if ev.DeadReason != 0 {
		j.DeadReason = ev.DeadReason.String()
	}
	return j
}
