package inbox_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/ledgerworks/ledger/chain"
	"github.com/ledgerworks/ledger/chain/chaintest"
	"github.com/ledgerworks/ledger/inbox"
	"github.com/ledgerworks/ledger/outbox/signature"
)

var now = time.Unix(1_800_000_000, 0)

// effects counts the effects applied: one entry each on an effects chain.
func applyEffect(tx *chain.Tx, e inbox.Event) error {
	_, err := tx.Append(chain.Request{Chain: "acme/erp/payments", Type: "payment.captured/v1", Payload: e.Body})
	return err
}

func effectCount(t *testing.T, db *chain.DB) uint64 {
	h, err := db.Head(context.Background(), "acme/erp/payments")
	if err != nil && !errors.Is(err, chain.ErrNotFound) {
		t.Fatal(err)
	}
	return h.Seq
}

func serve(t *testing.T, db *chain.DB, provider string, v inbox.Verifier) string {
	h, err := inbox.NewHandler(inbox.HandlerOptions{DB: db, Tenant: "acme", Provider: provider, Verifier: v, Apply: applyEffect,
		Clock: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv.URL
}

func post(t *testing.T, url string, header http.Header, body []byte) (int, string) {
	req, _ := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
	for k, v := range header {
		req.Header[k] = v
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out struct{ Status string }
	json.NewDecoder(resp.Body).Decode(&out)
	return resp.StatusCode, out.Status
}

func TestStripeRedeliveryRecordedOnce(t *testing.T) {
	chaintest.ForEachBackend(t, func() chain.Options { return chain.Options{} }, func(t *testing.T, db *chain.DB) {
		url := serve(t, db, "stripe", inbox.Stripe{Secrets: []string{"whsec_new", "whsec_old"}})
		body := []byte(`{"id":"evt_1","type":"payment_intent.succeeded"}`)
		var wg sync.WaitGroup
		codes := make([]string, 6)
		for i := range codes {
			wg.Add(1)
			go func() { // redeliveries, some concurrent, signed at other times and with either secret
				defer wg.Done()
				secret := []byte("whsec_new")
				if i%2 == 1 {
					secret = []byte("whsec_old")
				}
				h := http.Header{"Stripe-Signature": {signature.SignStripe(secret, now.Add(-time.Duration(i)*time.Second), body)}}
				code, status := post(t, url, h, body)
				codes[i] = fmt.Sprint(code, " ", status)
			}()
		}
		wg.Wait()
		received := 0
		for _, c := range codes {
			switch c {
			case "200 received":
				received++
			case "200 duplicate":
			default:
				t.Errorf("answer %q", c)
			}
		}
		if received != 1 || effectCount(t, db) != 1 {
			t.Fatalf("answers %v, %d effects: want one receipt and one effect", codes, effectCount(t, db))
		}
		// The same id with another body is refused, and applies nothing.
		other := []byte(`{"id":"evt_1","type":"charge.refunded"}`)
		if code, _ := post(t, url, http.Header{"Stripe-Signature": {signature.SignStripe([]byte("whsec_new"), now, other)}}, other); code != http.StatusConflict {
			t.Fatalf("reused id: %d", code)
		}
		if effectCount(t, db) != 1 {
			t.Fatal("a refused event applied its effect")
		}
	})
}

func TestBadSignaturesRecordNothing(t *testing.T) {
	db, err := chain.Open(t.TempDir()+"/ledger.db", chain.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	stripeURL := serve(t, db, "stripe", inbox.Stripe{Secrets: []string{"whsec_current"}})
	swURL := serve(t, db, "partner", inbox.StandardWebhooks{Secrets: []string{"whsec_c2VjcmV0LWtleQ=="}})
	ghURL := serve(t, db, "github", inbox.GitHub{Secrets: []string{"gh-secret"}})
	before := chaintest.TakeSnapshot(t, db)
	body := []byte(`{"id":"evt_9"}`)
	key, _ := signature.ParseStandardSecret("whsec_c2VjcmV0LWtleQ==")
	cases := []struct {
		name, url string
		header    http.Header
		body      []byte
		want      int
	}{
		{"stripe: wrong secret", stripeURL, http.Header{"Stripe-Signature": {signature.SignStripe([]byte("whsec_other"), now, body)}}, body, 401},
		{"stripe: stale", stripeURL, http.Header{"Stripe-Signature": {signature.SignStripe([]byte("whsec_current"), now.Add(-301*time.Second), body)}}, body, 401},
		{"stripe: body changed", stripeURL, http.Header{"Stripe-Signature": {signature.SignStripe([]byte("whsec_current"), now, body)}}, []byte(`{"id":"evt_10"}`), 401},
		{"stripe: no header", stripeURL, http.Header{}, body, 401},
		{"stripe: no id", stripeURL, http.Header{"Stripe-Signature": {signature.SignStripe([]byte("whsec_current"), now, []byte(`{}`))}}, []byte(`{}`), 400},
		{"standard: wrong key", swURL, http.Header{"Webhook-Id": {"msg_1"}, "Webhook-Timestamp": {"1800000000"},
			"Webhook-Signature": {signature.SignStandard([]byte("nope"), "msg_1", now, body)}}, body, 401},
		{"standard: id changed", swURL, http.Header{"Webhook-Id": {"msg_2"}, "Webhook-Timestamp": {"1800000000"},
			"Webhook-Signature": {signature.SignStandard(key, "msg_1", now, body)}}, body, 401},
		{"github: wrong secret", ghURL, http.Header{"X-Hub-Signature-256": {signature.SignGitHub([]byte("x"), body)}, "X-Github-Delivery": {"d-1"}}, body, 401},
		{"github: no delivery id", ghURL, http.Header{"X-Hub-Signature-256": {signature.SignGitHub([]byte("gh-secret"), body)}}, body, 400},
	}
	for _, c := range cases {
		if code, _ := post(t, c.url, c.header, c.body); code != c.want {
			t.Errorf("%s: %d, want %d", c.name, code, c.want)
		}
	}
	if diff := cmp.Diff(before, chaintest.TakeSnapshot(t, db)); diff != "" {
		t.Fatalf("refused requests wrote:\n%s", diff)
	}
	// Correctly signed, the same requests are recorded once each.
	gh := http.Header{"X-Hub-Signature-256": {signature.SignGitHub([]byte("gh-secret"), body)}, "X-Github-Delivery": {"d-1"}}
	sw := http.Header{"Webhook-Id": {"msg_1"}, "Webhook-Timestamp": {"1800000000"}, "Webhook-Signature": {signature.SignStandard(key, "msg_1", now, body)}}
	for round, want := range []string{"received", "duplicate"} {
		for _, r := range []struct {
			url string
			h   http.Header
		}{{ghURL, gh}, {swURL, sw}} {
			if code, status := post(t, r.url, r.h, body); code != 200 || status != want {
				t.Errorf("round %d: %d %s, want 200 %s", round, code, status, want)
			}
		}
	}
	if effectCount(t, db) != 2 {
		t.Fatalf("%d effects, want 2", effectCount(t, db))
	}
}

func TestReceiveTxRefusesBadInput(t *testing.T) {
	db, err := chain.Open(t.TempDir()+"/ledger.db", chain.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for _, r := range []inbox.ReceiveRequest{
		{Tenant: "acme", Provider: "stripe", EventID: ""},
		{Tenant: "acme", Provider: "st/ripe", EventID: "evt"},
		{Tenant: "", Provider: "stripe", EventID: "evt"},
		{Tenant: "acme", Provider: "stripe", EventID: "evt\n1"},
	} {
		if _, err := inbox.Receive(context.Background(), db, r, nil); !errors.Is(err, chain.ErrInvalid) {
			t.Errorf("%+v: %v, want ErrInvalid", r, err)
		}
	}
}

// An application error rolls the receipt back with the effects: the
// provider is answered 500 and its redelivery is received as new.
func TestApplyErrorRecordsNothing(t *testing.T) {
	db, err := chain.Open(t.TempDir()+"/ledger.db", chain.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	fail := true
	h, err := inbox.NewHandler(inbox.HandlerOptions{DB: db, Tenant: "acme", Provider: "github", Verifier: inbox.GitHub{Secrets: []string{"s"}},
		Apply: func(tx *chain.Tx, e inbox.Event) error {
			if fail {
				return chain.ErrInvalid // a refused effect, say
			}
			return applyEffect(tx, e)
		}})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	defer srv.Close()
	body := []byte(`{"action":"opened"}`)
	hdr := http.Header{"X-Hub-Signature-256": {signature.SignGitHub([]byte("s"), body)}, "X-Github-Delivery": {"d-9"}}
	if code, status := post(t, srv.URL, hdr, body); code != 500 || status != "not_applied" {
		t.Fatalf("failing apply: %d %s", code, status)
	}
	fail = false
	if code, status := post(t, srv.URL, hdr, body); code != 200 || status != "received" || effectCount(t, db) != 1 {
		t.Fatalf("redelivery: %d %s, %d effects", code, status, effectCount(t, db))
	}
}
