package server_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ledgerworks/ledger/api"
	"github.com/ledgerworks/ledger/outbox"
	"github.com/ledgerworks/ledger/server"
)

// A receiver that answers 302 or 307 with a Location on another local
// listener: the server's deliverer does not follow it. The target
// receives nothing, the message is dead at once (a redirect is
// permanent), and its history, read over the API, records the status and
// the Location and nothing of the target's answer.
func TestDeliveryRedirectsNotFollowed(t *testing.T) {
	var targetHits atomic.Int64
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		targetHits.Add(1)
		io.WriteString(w, "internal-secret-body")
	}))
	defer target.Close()
	for _, code := range []int{http.StatusFound, http.StatusTemporaryRedirect} {
		loc := target.URL + "/secret"
		var hits atomic.Int64
		receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			hits.Add(1)
			io.Copy(io.Discard, r.Body)
			w.Header().Set("Location", loc)
			w.WriteHeader(code)
		}))
		defer receiver.Close()
		ts := startServer(t, openBolt(t), server.Options{Deliveries: []server.Delivery{{Tenant: "acme", Topic: api.TopicDefault,
			URL: receiver.URL, Secret: whsec, AllowPrivateAddresses: true}}})
		token := ts.key("acme", allScopes...)
		fixture(t, ts, token)
		dead, ok := ts.deadLetters(t, token)
		if !ok {
			t.Fatalf("HTTP %d: no dead letter", code)
		}
		var hist api.OutboxMessageHistory
		ts.do(http.MethodGet, "/v1/outbox/messages/"+dead.Messages[0].ID, token, "", nil).decode(t, http.StatusOK, &hist)
		var outcomes []api.OutboxEvent
		for _, ev := range hist.History {
			if ev.Type == outbox.TypeOutcome {
				outcomes = append(outcomes, ev)
			}
			if strings.Contains(ev.Detail, "internal-secret") {
				t.Fatalf("HTTP %d: the target's answer is in the history: %+v", code, ev)
			}
		}
		if len(outcomes) != 1 || outcomes[0].Outcome != "rejected" || !strings.Contains(outcomes[0].Detail, `Location "`+loc+`"`) ||
			!strings.Contains(outcomes[0].Detail, "not followed") {
			t.Fatalf("HTTP %d: outcomes %+v, want one rejected attempt naming the Location", code, outcomes)
		}
		if hits.Load() != 1 {
			t.Fatalf("HTTP %d: the receiver got %d requests, want 1", code, hits.Load())
		}
	}
	if n := targetHits.Load(); n != 0 {
		t.Fatalf("the redirect target received %d requests", n)
	}
}

// A delivery URL naming loopback, a private or a link-local address is
// refused when the server is built, unless the delivery allows it.
func TestDeliveryPrivateAddressRefused(t *testing.T) {
	db := openBolt(t)
	for _, u := range []string{"http://127.0.0.1:9/hook", "http://localhost:9/hook", "http://169.254.169.254/latest", "http://[::1]:9/",
		"http://10.0.0.7/hook", "http://[::ffff:192.168.0.1]/"} {
		_, err := server.New(server.Options{DB: db, Deliveries: []server.Delivery{{Tenant: "acme", Topic: api.TopicDefault, URL: u, Secret: whsec}}})
		var de *server.DeliveryError
		if !errors.Is(err, outbox.ErrAddressRefused) || !errors.As(err, &de) {
			t.Errorf("%s: %v, want a DeliveryError wrapping ErrAddressRefused", u, err)
		}
		s, err := server.New(server.Options{DB: db, Deliveries: []server.Delivery{{Tenant: "acme", Topic: api.TopicDefault, URL: u, Secret: whsec,
			AllowPrivateAddresses: true}}})
		if err != nil {
			t.Errorf("%s allowed: %v", u, err)
		} else {
			s.Stop(context.Background())
		}
	}
	_, err := server.ReadConfig(writeConfig(t, `{"deliveries":[{"tenant":"acme","topic":"t","url":"http://127.0.0.1:9/h","secret":"`+whsec+`"}]}`))
	if !errors.Is(err, outbox.ErrAddressRefused) {
		t.Fatalf("configuration file with a loopback URL: %v", err)
	}
}

// A delivery's timeout is within its worker's lease: a pair the lease
// cannot carry is refused when the server is built; with no lease set,
// the lease is derived from the timeout (a 40 s receiver gets a 60 s
// lease, not the 30 s default); and a receiver that answers after two
// thirds of a short lease, within its timeout, is attempted once.
func TestDeliveryTimeoutWithinLease(t *testing.T) {
	_, err := server.New(server.Options{DB: openBolt(t), OutboxLease: 500 * time.Millisecond, Deliveries: []server.Delivery{{Tenant: "acme",
		Topic: api.TopicDefault, URL: "http://127.0.0.1:9/h", Secret: whsec, AllowPrivateAddresses: true, Timeout: server.Duration(time.Second)}}})
	var de *server.DeliveryError
	if !errors.Is(err, outbox.ErrTimeoutBeyondLease) || !errors.As(err, &de) {
		t.Fatalf("timeout 1s, lease 500ms: %v, want a DeliveryError wrapping ErrTimeoutBeyondLease", err)
	}

	for _, tc := range []struct {
		lease, timeout, answerAfter, wantLease time.Duration
	}{
		{0, 40 * time.Second, 0, 60 * time.Second},
		{1500 * time.Millisecond, time.Second, 800 * time.Millisecond, 1500 * time.Millisecond},
	} {
		var hits atomic.Int64
		receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			hits.Add(1)
			io.Copy(io.Discard, r.Body)
			time.Sleep(tc.answerAfter)
			w.WriteHeader(http.StatusNoContent)
		}))
		defer receiver.Close()
		ts := startServer(t, openBolt(t), server.Options{OutboxLease: tc.lease, Deliveries: []server.Delivery{{Tenant: "acme",
			Topic: api.TopicDefault, URL: receiver.URL, Secret: whsec, AllowPrivateAddresses: true, Timeout: server.Duration(tc.timeout)}}})
		token := ts.key("acme", allScopes...)
		fixture(t, ts, token)
		var done api.OutboxMessageList
		for deadline := time.Now().Add(10 * time.Second); len(done.Messages) == 0; time.Sleep(20 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("lease %v: not delivered", tc.lease)
			}
			ts.do(http.MethodGet, "/v1/outbox/messages?status=done", token, "", nil).decode(t, http.StatusOK, &done)
		}
		var hist api.OutboxMessageHistory
		ts.do(http.MethodGet, "/v1/outbox/messages/"+done.Messages[0].ID, token, "", nil).decode(t, http.StatusOK, &hist)
		if done.Messages[0].Attempts != 1 || hits.Load() != 1 {
			t.Fatalf("lease %v: %d attempts, %d requests, want 1", tc.lease, done.Messages[0].Attempts, hits.Load())
		}
		leases := 0
		for _, ev := range hist.History {
			if ev.Type == outbox.TypeLease {
				leases++
				// The deadline is computed a moment before the entry's time.
				if held := time.Duration(ev.Deadline - ev.TimeUnixNano); held < tc.wantLease-time.Second || held > tc.wantLease {
					t.Fatalf("lease %v, timeout %v: leased for %v, want %v", tc.lease, tc.timeout, held, tc.wantLease)
				}
			}
		}
		if leases != 1 {
			t.Fatalf("lease %v: %d lease events, want 1", tc.lease, leases)
		}
	}
}
