package inbox

import (
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/ledgerworks/ledger/chain"
	"github.com/ledgerworks/ledger/outbox/signature"
)

// Event is a verified, newly received event handed to the application.
type Event struct {
	Provider, ID string
	Body         []byte
	Header       http.Header
	Receipt      Receipt
}

// HandlerOptions configure a Handler. DB, Tenant, Provider, Verifier and
// Apply are required.
type HandlerOptions struct {
	DB       *chain.DB
	Tenant   string
	Provider string
	Verifier Verifier
	// Apply applies a new event's effects in the transaction that records
	// it; its error rolls both back and answers 500, so the provider
	// delivers the event again.
	Apply func(tx *chain.Tx, e Event) error
	// BodySizeMax bounds the body read; BodySizeMax when zero.
	BodySizeMax int64
	// Clock is the verifiers' time; time.Now when nil.
	Clock  func() time.Time
	Logger *slog.Logger
	// TracerProvider, when set, makes the verification a span (see
	// Verify); the receipt's span comes with the ledger's (DB's
	// chain.Options.TracerProvider). None when nil.
	TracerProvider trace.TracerProvider
}

// NewHandler returns a net/http handler for one provider's webhooks. It
// reads the raw body, verifies its signature (401 when refused, nothing
// recorded), records the event and calls Apply in one transaction, and
// answers 200 {"status":"received"}; a redelivered event is answered 200
// {"status":"duplicate"} without calling Apply, so the provider stops
// retrying. A known id with another body is 409.
func NewHandler(o HandlerOptions) (http.Handler, error) {
	if o.DB == nil || o.Verifier == nil || o.Apply == nil {
		return nil, errors.New("inbox: a handler needs DB, Verifier and Apply")
	}
	if _, err := Chain(o.Tenant, o.Provider); err != nil {
		return nil, err
	}
	if o.BodySizeMax <= 0 {
		o.BodySizeMax = BodySizeMax
	}
	if o.Clock == nil {
		o.Clock = time.Now
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	return &handler{o: o}, nil
}

type handler struct{ o HandlerOptions }

func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		answer(w, http.StatusMethodNotAllowed, "method_not_allowed")
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, h.o.BodySizeMax))
	if err != nil {
		answer(w, http.StatusRequestEntityTooLarge, "body_too_large")
		return
	}
	id, err := Verify(r.Context(), h.o.TracerProvider, h.o.Verifier, h.o.Provider, r.Header, body, h.o.Clock())
	switch {
	case errors.Is(err, signature.ErrInvalid):
		h.o.Logger.Warn("inbox: signature refused", "provider", h.o.Provider, "err", err)
		answer(w, http.StatusUnauthorized, "bad_signature")
		return
	case err != nil:
		answer(w, http.StatusBadRequest, "no_event_id")
		return
	}
	req := ReceiveRequest{Tenant: h.o.Tenant, Provider: h.o.Provider, EventID: id, Body: body}
	rec, err := Receive(r.Context(), h.o.DB, req, func(tx *chain.Tx) error {
		if err := h.o.Apply(tx, Event{Provider: h.o.Provider, ID: id, Body: body, Header: r.Header}); err != nil {
			return &applyError{err: err}
		}
		return nil
	})
	var applyErr *applyError
	switch {
	case errors.As(err, &applyErr):
		h.o.Logger.Error("inbox: effects not applied", "provider", h.o.Provider, "event", id, "err", applyErr.err)
		answer(w, http.StatusInternalServerError, "not_applied")
	case errors.Is(err, ErrBodyMismatch):
		answer(w, http.StatusConflict, "event_id_reused")
	case errors.Is(err, chain.ErrInvalid):
		answer(w, http.StatusBadRequest, "invalid_event_id")
	case err != nil:
		h.o.Logger.Error("inbox: event not recorded", "provider", h.o.Provider, "event", id, "err", err)
		answer(w, http.StatusInternalServerError, "not_recorded")
	case rec.Duplicate:
		answer(w, http.StatusOK, "duplicate")
	default:
		answer(w, http.StatusOK, "received")
	}
}

// applyError is an error of the application's Apply: the receipt rolled
// back with it, and the provider is asked to deliver again.
type applyError struct{ err error }

func (e *applyError) Error() string { return e.err.Error() }
func (e *applyError) Unwrap() error { return e.err }

func answer(w http.ResponseWriter, code int, status string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	json.NewEncoder(w).Encode(map[string]string{"status": status})
}
