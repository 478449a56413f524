package server

import (
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/zeebo/blake3"

	"github.com/ledgerworks/ledger/api"
	"github.com/ledgerworks/ledger/chain"
	"github.com/ledgerworks/ledger/inbox"
	"github.com/ledgerworks/ledger/outbox"
	"github.com/ledgerworks/ledger/outbox/signature"
)

// The kinds of webhook signature a provider uses.
const (
	ProviderStripe   = "stripe"   // Stripe-Signature; the event id is the body's "id"
	ProviderGitHub   = "github"   // X-Hub-Signature-256; the event id is X-GitHub-Delivery
	ProviderStandard = "standard" // Standard Webhooks: webhook-id, webhook-timestamp, webhook-signature
)

// Provider is a sender of webhooks, received at /v1/webhooks/{Name} into
// its tenant's inbox: the signature is checked over the raw body before
// anything is written, and each event is recorded once per event id.
type Provider struct {
	Name   string `json:"name"`
	Kind   string `json:"kind"` // stripe, github or standard
	Tenant string `json:"tenant"`
	// Secrets are the signing secrets: the current one and, while rolling
	// them, the previous ones.
	Secrets []string `json:"secrets"`
	// Tolerance bounds a signature's age (stripe, standard);
	// signature.ToleranceDefault when zero.
	Tolerance Duration `json:"tolerance,omitempty"`
	// Topic, when set, enqueues each new event's body on this outbox topic
	// of the tenant, in the transaction that records the event, so that
	// the application receives it exactly once through the outbox.
	Topic string `json:"topic,omitempty"`
}

type provider struct {
	Provider
	verifier inbox.Verifier
	counts   providerCounts
}

func newProviders(ps []Provider) (map[string]*provider, error) {
	out := map[string]*provider{}
	for _, p := range ps {
		if _, err := inbox.Chain(p.Tenant, p.Name); err != nil {
			return nil, fmt.Errorf("webhook provider %q: %w", p.Name, err)
		}
		if out[p.Name] != nil {
			return nil, fmt.Errorf("webhook provider %q is configured twice", p.Name)
		}
		if len(p.Secrets) == 0 {
			return nil, fmt.Errorf("webhook provider %q has no secret", p.Name)
		}
		if p.Topic != "" {
			if _, err := outbox.MessagesChain(p.Tenant, p.Topic); err != nil {
				return nil, fmt.Errorf("webhook provider %q: %w", p.Name, err)
			}
		}
		pp := &provider{Provider: p}
		switch p.Kind {
		case ProviderStripe:
			pp.verifier = inbox.Stripe{Secrets: p.Secrets, Tolerance: time.Duration(p.Tolerance)}
		case ProviderGitHub:
			pp.verifier = inbox.GitHub{Secrets: p.Secrets}
		case ProviderStandard:
			for _, s := range p.Secrets {
				if _, err := signature.ParseStandardSecret(s); err != nil {
					return nil, fmt.Errorf("webhook provider %q: %w", p.Name, err)
				}
			}
			pp.verifier = inbox.StandardWebhooks{Secrets: p.Secrets, Tolerance: time.Duration(p.Tolerance)}
		default:
			return nil, fmt.Errorf("webhook provider %q: kind %q: want stripe, github or standard", p.Name, p.Kind)
		}
		out[p.Name] = pp
	}
	return out, nil
}

func (s *Server) webhookRoutes() []*Route {
	return []*Route{{Method: http.MethodPost, Path: "/v1/webhooks/{provider}", ID: "webhooks.receive", Tag: "inbox",
		Summary: "Receive a provider's webhook: its signature is checked before anything is written; each event is recorded once",
		Request: map[string]any{}, Response: api.WebhookReceipt{}, Status: http.StatusOK, raw: s.receiveWebhook}}
}

func (s *Server) receiveWebhook(c *call) {
	p := s.providers[c.r.PathValue("provider")]
	if p == nil {
		s.problem(c.w, c.r, notFoundf("no webhook provider %q is configured", c.r.PathValue("provider")))
		return
	}
	body, err := io.ReadAll(c.r.Body)
	if err != nil {
		s.problem(c.w, c.r, &httpError{status: http.StatusRequestEntityTooLarge, code: api.CodePayloadTooLarge, detail: err.Error()})
		return
	}
	id, err := inbox.Verify(c.ctx, s.opts.TracerProvider, p.verifier, p.Name, c.r.Header, body, s.now())
	switch {
	case errors.Is(err, signature.ErrInvalid):
		p.counts.badSignatures.Add(1)
		s.problem(c.w, c.r, &httpError{status: http.StatusUnauthorized, code: api.CodeBadSignature, detail: err.Error()})
		return
	case err != nil:
		s.problem(c.w, c.r, &httpError{status: http.StatusBadRequest, code: api.CodeNoEventID, detail: err.Error()})
		return
	}
	var rec inbox.Receipt
	err = s.db.Update(c.ctx, func(tx *chain.Tx) error {
		var err error
		if rec, err = inbox.ReceiveTx(tx, inbox.ReceiveRequest{Tenant: p.Tenant, Provider: p.Name, EventID: id, Body: body}); err != nil {
			return err
		}
		if rec.Duplicate || p.Topic == "" {
			return nil
		}
		_, err = outbox.EnqueueTx(tx, outbox.EnqueueRequest{Tenant: p.Tenant, Topic: p.Topic, IdempotencyKey: inboxKey(p.Name, id),
			Headers: webhookHeaders(c.r, p.Name), Payload: body})
		return err
	})
	switch {
	case errors.Is(err, inbox.ErrBodyMismatch):
		p.counts.reused.Add(1)
		s.problem(c.w, c.r, &httpError{status: http.StatusConflict, code: api.CodeEventIDReused, detail: err.Error()})
		return
	case err != nil:
		s.problem(c.w, c.r, err)
		return
	}
	status := "received"
	if rec.Duplicate {
		status = "duplicate"
		p.counts.duplicates.Add(1)
	}
	writeJSON(c.w, http.StatusOK, api.WebhookReceipt{Status: status, Provider: p.Name, EventID: id,
		Chain: inbox.Domain + chain.NameSeparator + p.Name, Seq: rec.Entry.Seq})
}

// inboxKey is the enqueue key of a received event: a digest, since an
// event id may be longer than an enqueue key.
func inboxKey(provider, id string) string {
	h := blake3.New()
	_, _ = h.Write([]byte("ledger/server/inbox-event/v1\x00" + provider + "\x00" + id))
	return "inbox:" + hex.EncodeToString(h.Sum(nil)[:16])
}

// webhookHeaders are the headers an event's message carries.
func webhookHeaders(r *http.Request, provider string) []outbox.Header {
	h := []outbox.Header{{Name: "Webhook-Provider", Value: provider}}
	if ct := r.Header.Get("Content-Type"); ct != "" && len(ct) < 200 {
		h = append(h, outbox.Header{Name: "Content-Type", Value: ct})
	}
	return h
}
