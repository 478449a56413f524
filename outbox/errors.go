package outbox

import (
	"errors"
	"fmt"

	"github.com/ledgerworks/ledger/chain"
)

// Errors about a caller's input are *Error values matching one of these
// sentinels and chain.ErrInvalid (or chain.ErrNotFound for ErrUnknownMessage),
// so that callers and ledgerctl classify them like the engine's. Nothing is
// written when one is returned.
var (
	// ErrInvalidName: a tenant or topic is not a valid chain name component.
	ErrInvalidName = errors.New("invalid tenant or topic")
	// ErrInvalidKey: the enqueue idempotency key is missing, too long, not
	// UTF-8 or holds a control character. Every enqueue needs one: without
	// it a retried business operation would enqueue twice.
	ErrInvalidKey = errors.New("invalid idempotency key")
	// ErrInvalidMessage: an ordering key, header or payload breaks a limit.
	ErrInvalidMessage = errors.New("invalid message")
	// ErrInvalidOptions: a lease duration, batch size or worker id is out
	// of bounds.
	ErrInvalidOptions = errors.New("invalid options")
	// ErrUnknownMessage: no message has this id.
	ErrUnknownMessage = errors.New("unknown message")
	// ErrNotDead: a requeue named a message that is not dead.
	ErrNotDead = errors.New("message is not dead")
	// ErrTimeoutBeyondLease: a topic's handler timeout is too long for the
	// worker's lease (see LeaseFor): the lease could expire while the
	// handler still runs, and the message be attempted twice at once.
	ErrTimeoutBeyondLease = errors.New("handler timeout beyond the lease")
	// ErrAddressRefused: a webhook URL names, or its host resolves to, an
	// address the deliverer does not connect to unless
	// WebhookOptions.AllowPrivateAddresses says so (see CheckAddress):
	// loopback, private, link-local, unspecified, multicast, shared
	// (CGNAT), reserved and documentation ranges, and the IPv6 forms that
	// embed such an IPv4 address. A delivery could otherwise be pointed at
	// the host's own services or a cloud metadata endpoint. Refused when
	// the URL is parsed (an *Error) or when the deliverer connects (an
	// *AddressError in the attempt's permanent failure).
	ErrAddressRefused = errors.New("address refused")
)

// ErrLeaseLost is the outcome or heartbeat of a worker whose lease is no
// longer the message's current one: it expired and another worker claimed
// the message, or the message was finished. Nothing of it is recorded, so a
// worker that lost its lease can never overwrite a newer attempt.
var ErrLeaseLost = errors.New("lease lost")

// ErrPermanent marks a handler error as permanent: the message is dead at
// once, without retries. Wrap it with Permanent.
var ErrPermanent = errors.New("permanent failure")

// Error is an error about a caller's input.
type Error struct {
	Field  string
	Reason string
	Err    error // one of the sentinels above
}

func (e *Error) Error() string { return fmt.Sprintf("outbox: %v: %s", e.Err, e.Reason) }

// Unwrap matches the sentinel and the engine's class of it.
func (e *Error) Unwrap() []error {
	if e.Err == ErrUnknownMessage {
		return []error{e.Err, chain.ErrNotFound}
	}
	return []error{e.Err, chain.ErrInvalid}
}

func invalid(field string, sentinel error, format string, args ...any) error {
	return &Error{Field: field, Err: sentinel, Reason: fmt.Sprintf(format, args...)}
}

// permanentError is a handler error that dead-letters its message.
type permanentError struct{ err error }

func (e *permanentError) Error() string   { return e.err.Error() }
func (e *permanentError) Unwrap() []error { return []error{e.err, ErrPermanent} }

// Permanent wraps err so that the worker dead-letters the message instead
// of retrying it; errors.Is(err, ErrPermanent) then holds.
func Permanent(err error) error {
	if err == nil {
		err = errors.New("permanent failure")
	}
	return &permanentError{err: err}
}

// IsUnknown reports whether err says that no message has the id.
func IsUnknown(err error) bool { return errors.Is(err, ErrUnknownMessage) }

func isNotFound(err error) bool { return errors.Is(err, chain.ErrNotFound) }
