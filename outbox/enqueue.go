package outbox

import (
	"bytes"
	"context"
	"errors"
	"slices"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"go.opentelemetry.io/otel/trace"

	"github.com/ledgerworks/ledger/chain"
)

// EnqueueRequest is one message to enqueue.
type EnqueueRequest struct {
	// Tenant scopes the message; it is the tenant of the caller's other
	// chains.
	Tenant string
	// Topic names the handler that delivers it (an email sender, a
	// payment capture, a webhook endpoint). A chain name component.
	Topic string
	// IdempotencyKey is required: the business operation's key (or one
	// derived from it), so that a retried operation enqueues once. A retry
	// with the same key and message is a replay; with another message it
	// is a *chain.ConflictError.
	IdempotencyKey string
	// OrderingKey, when set, delivers the messages of the topic that share
	// it in enqueue order, one at a time; a failing one holds back only
	// those behind it. Empty: no ordering.
	OrderingKey string
	// Headers travel with the message (a webhook deliverer sends them as
	// HTTP headers). Names are unique; they are stored sorted.
	Headers []Header
	// Payload is the message body, at most PayloadSizeMax bytes.
	Payload []byte
	// NotBefore delays the first attempt; the zero time means at once.
	NotBefore time.Time
}

// EnqueueResult is what an enqueue recorded.
type EnqueueResult struct {
	ID ID
	// Key is the idempotency key every delivery attempt carries.
	Key   string
	Entry chain.Entry
	// Replayed is set when the message was enqueued before; nothing was
	// written.
	Replayed bool
}

// Enqueue enqueues a message in its own transaction.
func Enqueue(ctx context.Context, db *chain.DB, r EnqueueRequest) (EnqueueResult, error) {
	var res EnqueueResult
	err := db.Update(ctx, func(tx *chain.Tx) error {
		var err error
		res, err = EnqueueTx(tx, r)
		return err
	})
	return res, err
}

// EnqueueTx enqueues a message in the caller's transaction, beside the
// business entries that cause it: the message exists exactly when they do.
// Workers are woken when the transaction commits.
//
// When the transaction's context holds a recording span, the enqueue is a
// span of its own under it, and the message keeps that span's traceparent
// (Message.TraceParent): its delivery attempts link back to it. The trace
// context is not part of the request a retry must repeat: a retry from
// another trace replays the message.
func EnqueueTx(tx *chain.Tx, r EnqueueRequest) (res EnqueueResult, err error) {
	m, err := validateEnqueue(&r)
	if err != nil {
		return EnqueueResult{}, err
	}
	if span := startEnqueueSpan(tx.Context(), &r); span != nil {
		m.TraceParent = traceParentOf(trace.ContextWithSpan(tx.Context(), span))
		defer func() { endEnqueueSpan(span, &res, err) }()
	} else {
		m.TraceParent = traceParentOf(tx.Context())
	}
	return enqueueTx(tx, &r, &m)
}

func enqueueTx(tx *chain.Tx, r *EnqueueRequest, m *messageEvent) (EnqueueResult, error) {
	name, _ := MessagesChain(r.Tenant, r.Topic)
	if m.OrderingKey != "" {
		// Lock the deliveries chain: the ordering key's queue is read
		// here and changed by the deliveries, so on a shared store the two
		// must not interleave.
		deliveries, _ := DeliveriesChain(r.Tenant, r.Topic)
		if _, err := tx.Head(deliveries); err != nil && !chainNotFound(err) {
			return EnqueueResult{}, err
		}
	}
	res, err := tx.Append(chain.Request{Chain: name, IdempotencyKey: r.IdempotencyKey, Type: TypeMessage, Payload: m.encode()})
	if ce := (*chain.ConflictError)(nil); errors.As(err, &ce) {
		res, err = sameBeyondTrace(tx, ce, m)
	}
	if err != nil {
		return EnqueueResult{}, err
	}
	id := MessageID(r.Tenant, r.Topic, r.IdempotencyKey)
	out := EnqueueResult{ID: id, Key: id.Key(), Entry: res.Entry, Replayed: res.Replayed}
	if res.Replayed {
		return out, nil
	}
	if err := applyMessage(newTxState(tx), r.Tenant, r.Topic, &res.Entry, m, true); err != nil {
		return EnqueueResult{}, err
	}
	notify(tx, r.Tenant, r.Topic)
	return out, nil
}

// sameBeyondTrace answers an enqueue whose key holds another entry: a
// replay when that entry is the same message but for its trace context
// (the retry of a request from another trace, or traced once and not the
// other time), else the conflict.
func sameBeyondTrace(tx *chain.Tx, ce *chain.ConflictError, m *messageEvent) (chain.Result, error) {
	e, err := tx.Get(ce.Chain, ce.ExistingSeq)
	if err != nil || e.Type != TypeMessage {
		return chain.Result{}, ce
	}
	stored, err := decodeMessage(e.Payload)
	if err != nil {
		return chain.Result{}, ce
	}
	mine := *m
	mine.TraceParent, stored.TraceParent = "", ""
	if !bytes.Equal(mine.encode(), stored.encode()) {
		return chain.Result{}, ce
	}
	return chain.Result{Entry: e, Replayed: true}, nil
}

func validateEnqueue(r *EnqueueRequest) (messageEvent, error) {
	if err := validateNames(r.Tenant, r.Topic); err != nil {
		return messageEvent{}, err
	}
	if err := validText("idempotency_key", r.IdempotencyKey, 1, IdempotencyKeyLengthMax, ErrInvalidKey); err != nil {
		return messageEvent{}, err
	}
	if err := validText("ordering_key", r.OrderingKey, 0, OrderingKeyLengthMax, ErrInvalidMessage); err != nil {
		return messageEvent{}, err
	}
	if len(r.Payload) > PayloadSizeMax {
		return messageEvent{}, invalid("payload", ErrInvalidMessage, "payload of %d bytes, at most %d", len(r.Payload), PayloadSizeMax)
	}
	if len(r.Headers) > HeadersMax {
		return messageEvent{}, invalid("headers", ErrInvalidMessage, "%d headers, at most %d", len(r.Headers), HeadersMax)
	}
	headers := slices.Clone(r.Headers)
	slices.SortFunc(headers, func(a, b Header) int { return strings.Compare(a.Name, b.Name) })
	for i, h := range headers {
		if err := validText("header name", h.Name, 1, HeaderNameLengthMax, ErrInvalidMessage); err != nil {
			return messageEvent{}, err
		}
		if err := validText("header "+h.Name, h.Value, 0, HeaderValueLengthMax, ErrInvalidMessage); err != nil {
			return messageEvent{}, err
		}
		if i > 0 && headers[i-1].Name == h.Name {
			return messageEvent{}, invalid("headers", ErrInvalidMessage, "header %q given twice", h.Name)
		}
	}
	m := messageEvent{OrderingKey: r.OrderingKey, Headers: headers, Payload: r.Payload}
	if !r.NotBefore.IsZero() {
		m.NotBefore = r.NotBefore.UnixNano()
	}
	if len(m.Headers) == 0 {
		m.Headers = nil
	}
	return m, nil
}

// validText checks a field's length and that it is UTF-8 without control
// characters.
func validText(field, s string, lengthMin, lengthMax int, sentinel error) error {
	if len(s) < lengthMin || len(s) > lengthMax {
		if lengthMin > 0 && s == "" {
			return invalid(field, sentinel, "%s is required", field)
		}
		return invalid(field, sentinel, "%s of %d bytes, want %d..%d", field, len(s), lengthMin, lengthMax)
	}
	if !utf8.ValidString(s) {
		return invalid(field, sentinel, "%s is not UTF-8", field)
	}
	if strings.ContainsFunc(s, unicode.IsControl) {
		return invalid(field, sentinel, "%s holds a control character", field)
	}
	return nil
}

func chainNotFound(err error) bool { return err != nil && isNotFound(err) }
