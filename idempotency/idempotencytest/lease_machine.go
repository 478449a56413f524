package idempotencytest

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/ledgerworks/ledger/idempotency"
)

// leaseModel is the plain model of one key under the guard: who holds it
// and until when, how many failures counted, and how it ended.
type leaseModel struct {
	status   idempotency.Status // "" when the key is free
	leaseEnd time.Time          // of a PROCESSING key, held by a dead attempt
	counted  int                // transient failures that counted
	dead     int                // dead attempts made, for their tokens
}

const (
	leaseMachineLease      = 10 * time.Second
	leaseMachineMaxRetries = 3
	leaseMachineDeadMax    = 5
)

// release counts a failure of the key's attempt: the key is poisoned at
// limit (MaxRetries for a handler's failure, DeadAttemptsMax for a dead
// attempt), else free.
func (m *leaseModel) release(limit int) {
	m.counted++
	if m.counted >= limit {
		m.status = idempotency.StatusFailed
		return
	}
	m.status = ""
}

// LeaseMachine checks the guard over h's stores against a plain model of
// one key under random sequences of: attempts that die holding the key,
// the clock, the recovery job, and requests whose handler succeeds, fails
// (500) or meets an outage (503, Options.IsOutage). It checks that a held
// key is answered REQUEST_IN_PROGRESS with the lease left as Retry-After,
// that the first request after a lease ended takes the key over, that
// failures and dead attempts count (a dead attempt poisons at
// DeadAttemptsMax, a failure at MaxRetries) and outages never do,
// and the attempt number every run sees.
func LeaseMachine(t *testing.T, h Harness) {
	rapid.Check(t, func(rt *rapid.T) {
		store := h.Open(t)
		clock := NewClock()
		s := newServer(t, store, idempotency.Options{Clock: clock.Now, LeaseDuration: leaseMachineLease,
			MaxRetries: leaseMachineMaxRetries, DeadAttemptsMax: leaseMachineDeadMax, Logger: slog.New(slog.DiscardHandler),
			IsOutage: func(status int, err error) bool { return status == http.StatusServiceUnavailable }})
		defer s.Close()
		s.clock = clock
		m := &leaseModel{}
		scope := idempotency.Scope{Operation: "POST /payments", User: "alice", Key: "k-1"}
		canon, _ := idempotency.CanonicalJSON([]byte(body1))
		hash := idempotency.RequestHash(scope.Operation, canon)
		ctx := context.Background()
		rt.Repeat(map[string]func(*rapid.T){
			"AttemptDies": func(rt *rapid.T) {
				if m.status != "" {
					rt.Skip("the key is not free")
				}
				now := clock.Now()
				m.dead++
				res, err := store.Create(ctx, idempotency.Claim{Scope: scope, RequestHash: hash, Token: fmt.Sprint("dead-", m.dead),
					Now: now, LeaseExpiresAt: now.Add(leaseMachineLease), ExpiresAt: now.Add(24 * time.Hour)})
				if err != nil || !res.Created || res.Record.Attempt != m.counted+1 {
					rt.Fatalf("claim of a free key: %+v, %v; want attempt %d", res, err, m.counted+1)
				}
				m.status, m.leaseEnd = idempotency.StatusProcessing, now.Add(leaseMachineLease)
			},
			"Advance": func(rt *rapid.T) {
				clock.Advance(time.Duration(rapid.IntRange(1, 40).Draw(rt, "quarter seconds")) * time.Second / 4)
			},
			"Recover": func(rt *rapid.T) {
				want := 0
				if m.status == idempotency.StatusProcessing && !clock.Now().Before(m.leaseEnd) {
					m.release(leaseMachineDeadMax)
					want = 1
				}
				n, err := s.guard.Jobs().RecoverStuckRecords(ctx, 0, 10)
				if err != nil || n != want {
					rt.Fatalf("recover: %d, %v; want %d", n, err, want)
				}
			},
			"Request": func(rt *rapid.T) {
				outcome := rapid.SampledFrom([]int{http.StatusCreated, http.StatusInternalServerError, http.StatusServiceUnavailable}).Draw(rt, "outcome")
				ran, attempt := false, 0
				s.behave = func(w http.ResponseWriter, r *http.Request, run int64) {
					ran, attempt = true, idempotency.FromContext(r.Context()).Attempt
					w.WriteHeader(outcome)
				}
				now := clock.Now()
				if m.status == idempotency.StatusProcessing && !now.Before(m.leaseEnd) {
					m.release(leaseMachineDeadMax) // taken over
				}
				r := s.do(t, "/payments", "alice", "k-1", body1)
				switch m.status {
				case idempotency.StatusSuccess:
					if ran || r.status != http.StatusCreated || r.header.Get(idempotency.ReplayedHeader) != "true" {
						rt.Fatalf("a finished key: ran %v, %+v; want the replay", ran, r)
					}
				case idempotency.StatusFailed:
					if ran || r.code() != string(idempotency.CodeRequestFailed) {
						rt.Fatalf("a poisoned key: ran %v, %+v", ran, r)
					}
				case idempotency.StatusProcessing:
					left := m.leaseEnd.Sub(now)
					want := max(1, int((left+time.Second-1)/time.Second))
					if ran || r.code() != string(idempotency.CodeInProgress) || r.header.Get("Retry-After") != strconv.Itoa(want) {
						rt.Fatalf("a held key, %v of lease left: ran %v, %d %s Retry-After %q; want %d", left, ran, r.status, r.code(), r.header.Get("Retry-After"), want)
					}
				default:
					if !ran || r.status != outcome || attempt != m.counted+1 {
						rt.Fatalf("a free key: ran %v with attempt %d, %+v; want %d with attempt %d", ran, attempt, r, outcome, m.counted+1)
					}
					switch outcome {
					case http.StatusCreated:
						m.status = idempotency.StatusSuccess
					case http.StatusInternalServerError:
						m.release(leaseMachineMaxRetries)
					}
				}
			},
			"": func(rt *rapid.T) {
				rec, err := store.Get(ctx, scope, clock.Now())
				switch {
				case m.status == "" && err == nil:
					rt.Fatalf("the model's key is free, the store holds %+v", rec)
				case m.status != "" && (err != nil || rec.Status != m.status):
					rt.Fatalf("the store holds %+v, %v; the model %+v", rec, err, m)
				}
			},
		})
	})
}
