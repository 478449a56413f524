package inbox

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/ledgerworks/ledger/outbox/signature"
)

// Verifier checks an incoming request's signature over its raw body and
// names the event's id, before anything is recorded.
type Verifier interface {
	// Verify returns the provider's event id, or an error matching
	// signature.ErrInvalid (refused: 401) or ErrNoEventID (400).
	Verify(h http.Header, body []byte, now time.Time) (eventID string, err error)
}

// ErrNoEventID: a verified request names no event id.
var ErrNoEventID = errors.New("request names no event id")

func decodeSecrets(secrets []string) [][]byte {
	out := make([][]byte, len(secrets))
	for i, s := range secrets {
		out[i] = []byte(s)
	}
	return out
}

// Stripe verifies Stripe-Signature and takes the event id from the
// body's "id".
type Stripe struct {
	// Secrets are the endpoint's signing secrets (whsec_…), the current one
	// and, while rolling, the previous ones.
	Secrets []string
	// Tolerance bounds the signature's age; signature.ToleranceDefault
	// (300 s) when zero.
	Tolerance time.Duration
}

// Verify implements Verifier.
func (s Stripe) Verify(h http.Header, body []byte, now time.Time) (string, error) {
	if err := signature.VerifyStripe(decodeSecrets(s.Secrets), h.Get("Stripe-Signature"), body, now, s.Tolerance); err != nil {
		return "", err
	}
	var event struct {
		ID string `json:"id"`
	}
	if err := json.Unmarshal(body, &event); err != nil || event.ID == "" {
		return "", fmt.Errorf("%w: the body has no \"id\"", ErrNoEventID)
	}
	return event.ID, nil
}

// StandardWebhooks verifies webhook-id, webhook-timestamp and
// webhook-signature; the event id is webhook-id.
type StandardWebhooks struct {
	// Secrets are "whsec_<base64>" keys, current and previous.
	Secrets   []string
	Tolerance time.Duration
}

// Verify implements Verifier.
func (s StandardWebhooks) Verify(h http.Header, body []byte, now time.Time) (string, error) {
	keys := make([][]byte, 0, len(s.Secrets))
	for _, secret := range s.Secrets {
		k, err := signature.ParseStandardSecret(secret)
		if err != nil {
			return "", err
		}
		keys = append(keys, k)
	}
	id := h.Get("webhook-id")
	if err := signature.VerifyStandard(keys, id, h.Get("webhook-timestamp"), h.Get("webhook-signature"), body, now, s.Tolerance); err != nil {
		return "", err
	}
	return id, nil
}

// GitHub verifies X-Hub-Signature-256; the event id is X-GitHub-Delivery
// (GitHub signs no timestamp, so the record of deliveries is what stops a
// replay).
type GitHub struct {
	Secrets []string
}

// Verify implements Verifier.
func (g GitHub) Verify(h http.Header, body []byte, _ time.Time) (string, error) {
	if err := signature.VerifyGitHub(decodeSecrets(g.Secrets), h.Get("X-Hub-Signature-256"), body); err != nil {
		return "", err
	}
	id := h.Get("X-GitHub-Delivery")
	if id == "" {
		return "", fmt.Errorf("%w: no X-GitHub-Delivery", ErrNoEventID)
	}
	return id, nil
}
