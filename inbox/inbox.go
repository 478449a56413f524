package inbox

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/zeebo/blake3"

	"github.com/ledgerworks/ledger/chain"
)

// Domain is the chain name component of the inbox: a provider's events
// are recorded on tenant/inbox/<provider>.
const Domain = "inbox"

// TypeEvent is the payload type of a received event's entry.
const TypeEvent = "inbox.event/v1"

// Limits checked on entry.
const (
	// EventIDLengthMax is the longest provider event id.
	EventIDLengthMax = 256
	// BodySizeMax is the largest body the handler reads.
	BodySizeMax = 1 << 20
)

// Errors about a caller's input match one of these and chain.ErrInvalid;
// nothing is written when one is returned.
var (
	ErrInvalidName    = errors.New("invalid tenant or provider")
	ErrInvalidEventID = errors.New("invalid event id")
	// ErrBodyMismatch: the event id was received before with another body.
	// It also matches chain.ErrIdempotencyConflict.
	ErrBodyMismatch = errors.New("event received before with another body")
)

type inputError struct {
	err    error
	reason string
}

func (e *inputError) Error() string   { return fmt.Sprintf("inbox: %v: %s", e.err, e.reason) }
func (e *inputError) Unwrap() []error { return []error{e.err, chain.ErrInvalid} }

// Chain returns the chain a provider's events are recorded on.
func Chain(tenant, provider string) (string, error) {
	name, err := chain.ScopedName(tenant, Domain, provider)
	if err != nil {
		return "", &inputError{err: ErrInvalidName, reason: err.Error()}
	}
	return name, nil
}

// Digest is BLAKE3-256("ledger/inbox/body/v1" || 0x00 || body).
func Digest(body []byte) [32]byte {
	h := blake3.New()
	h.Write([]byte("ledger/inbox/body/v1\x00"))
	h.Write(body)
	var d [32]byte
	h.Sum(d[:0])
	return d
}

// ReceiveRequest is one incoming event, after its signature was checked.
type ReceiveRequest struct {
	Tenant   string
	Provider string // "stripe", "github", a partner's name
	// EventID is the provider's id of the event (Stripe's evt_…, GitHub's
	// X-GitHub-Delivery, Standard Webhooks' webhook-id): the key the
	// event is recorded once under.
	EventID string
	Body    []byte
}

// Receipt is what Receive recorded.
type Receipt struct {
	Entry chain.Entry
	// Duplicate is set when the event was received before: nothing was
	// written, and its effects must not be applied again.
	Duplicate bool
	Digest    [32]byte
}

// eventPayload: version 1, the body's digest, its size.
func eventPayload(d [32]byte, size int) []byte {
	b := make([]byte, 0, 41)
	b = append(b, 1)
	b = append(b, d[:]...)
	return binary.BigEndian.AppendUint64(b, uint64(size))
}

// ReceiveTx records the event in the caller's transaction, once per
// (provider, event id): a redelivery returns the first receipt with
// Duplicate set and writes nothing. Apply the event's effects in the same
// transaction only when it is not a duplicate; they then commit together
// with the receipt, or not at all. The same id with another body is
// refused with ErrBodyMismatch. Receipts are kept for good. When the
// transaction's context holds a recording span, the receipt is a span of
// its own under it, "inbox.record".
func ReceiveTx(tx *chain.Tx, r ReceiveRequest) (rec Receipt, err error) {
	if span := startRecordSpan(tx.Context(), &r); span != nil {
		defer func() { endRecordSpan(span, &rec, err) }()
	}
	return receiveTx(tx, r)
}

func receiveTx(tx *chain.Tx, r ReceiveRequest) (Receipt, error) {
	name, err := Chain(r.Tenant, r.Provider)
	if err != nil {
		return Receipt{}, err
	}
	if r.EventID == "" || len(r.EventID) > EventIDLengthMax || !utf8.ValidString(r.EventID) || strings.ContainsFunc(r.EventID, unicode.IsControl) {
		return Receipt{}, &inputError{err: ErrInvalidEventID, reason: fmt.Sprintf("event id %q: want 1..%d bytes of UTF-8 text", r.EventID, EventIDLengthMax)}
	}
	d := Digest(r.Body)
	res, err := tx.Append(chain.Request{Chain: name, IdempotencyKey: r.EventID, Type: TypeEvent, Payload: eventPayload(d, len(r.Body))})
	if errors.Is(err, chain.ErrIdempotencyConflict) {
		return Receipt{}, fmt.Errorf("inbox: %s event %q: %w: %w", r.Provider, r.EventID, ErrBodyMismatch, err)
	}
	if err != nil {
		return Receipt{}, err
	}
	return Receipt{Entry: res.Entry, Duplicate: res.Replayed, Digest: d}, nil
}

// Receive is ReceiveTx followed by apply, when the event is new, in one
// transaction.
func Receive(ctx context.Context, db *chain.DB, r ReceiveRequest, apply func(tx *chain.Tx) error) (Receipt, error) {
	var rec Receipt
	err := db.Update(ctx, func(tx *chain.Tx) error {
		var err error
		if rec, err = ReceiveTx(tx, r); err != nil || rec.Duplicate || apply == nil {
			return err
		}
		return apply(tx)
	})
	return rec, err
}
