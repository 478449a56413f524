package outbox_test

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/ledgerworks/ledger/chain"
	"github.com/ledgerworks/ledger/outbox"
)

// The outbox against a plain model: every operation's answer and every
// message's state are predicted, and after every step the stored state
// equals the state the chains give (outbox.Check) and the chains verify.

const (
	modelTenant      = "acme"
	modelMaxAttempts = 3
	modelMaxAge      = time.Hour
)

var modelPolicy = outbox.Policy{MaxAttempts: modelMaxAttempts, MaxAge: modelMaxAge, BackoffMin: time.Second, BackoffMax: 8 * time.Second}

type modelMessage struct {
	id          outbox.ID
	topic, key  string
	orderingKey string
	payload     string
	seq         int // enqueue order within the topic
	status      outbox.Status
	attempts    int
	due         time.Time // pending: next attempt; leased: deadline
	token       uint64
	ageFrom     time.Time
}

type outboxMachine struct {
	path    string
	clock   *testClock
	db      *chain.DB
	msgs    map[outbox.ID]*modelMessage
	byKey   map[string]outbox.ID // topic/key -> id
	seqs    map[string]int
	leases  []outbox.Lease // every lease handed out, current or stale
	lastTok map[string]uint64
}

func (m *outboxMachine) init(t fataler) {
	m.clock = newTestClock()
	m.db = openBolt(t, m.path, m.clock.Now)
	m.msgs, m.byKey, m.seqs, m.lastTok = map[outbox.ID]*modelMessage{}, map[string]outbox.ID{}, map[string]int{}, map[string]uint64{}
}

var (
	modelTopics  = []string{"email", "webhook"}
	modelKeys    = []string{"k1", "k2", "k3", "k4", "k5", "k6"}
	modelOrdered = []string{"", "", "cust-A", "cust-B"}
)

func (m *outboxMachine) Enqueue(t *rapid.T) {
	topic := rapid.SampledFrom(modelTopics).Draw(t, "topic")
	key := rapid.SampledFrom(modelKeys).Draw(t, "key")
	conflict := rapid.IntRange(0, 9).Draw(t, "conflict") == 0
	prev, exists := m.byKey[topic+"/"+key]
	ordering := rapid.SampledFrom(modelOrdered).Draw(t, "ordering")
	payload := "payload of " + key
	if exists {
		ordering = m.msgs[prev].orderingKey // a retry sends the same request
		if conflict {
			payload = "changed"
		}
	}
	res, err := outbox.Enqueue(context.Background(), m.db, outbox.EnqueueRequest{Tenant: modelTenant, Topic: topic,
		IdempotencyKey: key, OrderingKey: ordering, Payload: []byte(payload)})
	switch {
	case exists && conflict:
		if !errors.Is(err, chain.ErrIdempotencyConflict) {
			t.Fatalf("changed retry: %v, want a conflict", err)
		}
		return
	case err != nil:
		t.Fatalf("enqueue: %v", err)
	case exists:
		if !res.Replayed || res.ID != prev {
			t.Fatalf("retry: %+v, want a replay of %s", res, prev)
		}
		return
	case res.Replayed:
		t.Fatalf("new message replayed")
	}
	m.seqs[topic]++
	now := m.clock.Now()
	m.msgs[res.ID] = &modelMessage{id: res.ID, topic: topic, key: key, orderingKey: ordering, payload: payload,
		seq: m.seqs[topic], status: outbox.Pending, due: now, ageFrom: now}
	m.byKey[topic+"/"+key] = res.ID
}

// ready returns the messages of the topic a claim may take now, in the
// order it takes them: due, and the oldest undelivered one of their key.
func (m *outboxMachine) ready(topic string) []*modelMessage {
	heads := map[string]*modelMessage{}
	var out []*modelMessage
	for _, msg := range m.sorted(topic) {
		if msg.status == outbox.Done {
			continue
		}
		if msg.orderingKey != "" {
			if heads[msg.orderingKey] != nil {
				continue
			}
			heads[msg.orderingKey] = msg
		}
		if (msg.status == outbox.Pending || msg.status == outbox.Leased) && !msg.due.After(m.clock.Now()) {
			out = append(out, msg)
		}
	}
	slices.SortStableFunc(out, func(a, b *modelMessage) int { return cmp.Or(a.due.Compare(b.due), cmp.Compare(a.seq, b.seq)) })
	return out
}

func (m *outboxMachine) sorted(topic string) []*modelMessage {
	var out []*modelMessage
	for _, msg := range m.msgs {
		if msg.topic == topic {
			out = append(out, msg)
		}
	}
	slices.SortFunc(out, func(a, b *modelMessage) int { return cmp.Compare(a.seq, b.seq) })
	return out
}

func (m *outboxMachine) Claim(t *rapid.T) {
	topic := rapid.SampledFrom(modelTopics).Draw(t, "topic")
	max := rapid.IntRange(1, 4).Draw(t, "max")
	lease := time.Duration(rapid.IntRange(1, 60).Draw(t, "lease_s")) * time.Second
	worker := rapid.SampledFrom([]string{"w1", "w2"}).Draw(t, "worker")
	now := m.clock.Now()
	var wantLeased, wantDead []outbox.ID
	expired := 0
	ready := m.ready(topic)
	for _, msg := range ready[:min(max, len(ready))] {
		switch {
		case now.Sub(msg.ageFrom) > modelMaxAge, msg.attempts >= modelMaxAttempts:
			wantDead = append(wantDead, msg.id)
		default:
			wantLeased = append(wantLeased, msg.id)
			if msg.status == outbox.Leased {
				expired++
			}
		}
	}
	var c outbox.Claim
	err := m.db.Update(context.Background(), func(tx *chain.Tx) error {
		var err error
		c, err = outbox.ClaimTx(tx, modelTenant, topic, outbox.ClaimOptions{Worker: worker, Max: max, LeaseDuration: lease, Now: now, Policy: modelPolicy})
		return err
	})
	if err != nil {
		t.Fatalf("claim: %v", err)
	}
	var got, gotDead []outbox.ID
	for _, l := range c.Leases {
		got = append(got, l.Message.ID)
	}
	for _, d := range c.Dead {
		gotDead = append(gotDead, d.ID)
	}
	if !slices.Equal(got, wantLeased) || !slices.Equal(gotDead, wantDead) || c.Expired != expired {
		t.Fatalf("claim leased %v dead %v expired %d, want %v %v %d", got, gotDead, c.Expired, wantLeased, wantDead, expired)
	}
	for _, id := range wantDead {
		m.msgs[id].status = outbox.Dead
	}
	for _, l := range c.Leases {
		msg := m.msgs[l.Message.ID]
		if l.Token <= m.lastTok[topic] {
			t.Fatalf("token %d after %d", l.Token, m.lastTok[topic])
		}
		if string(l.Message.Payload) != msg.payload || l.Message.Key != "outbox:"+msg.id.String() || l.Attempt != msg.attempts+1 {
			t.Fatalf("lease %+v of %+v", l, msg)
		}
		msg.status, msg.attempts, msg.token, msg.due = outbox.Leased, l.Attempt, l.Token, now.Add(lease)
		m.leases = append(m.leases, l)
	}
	if len(c.Leases) > 0 {
		m.lastTok[topic] = c.Leases[0].Token
	}
}

// current reports whether a lease handed out is still its message's.
func (m *outboxMachine) current(l outbox.Lease) bool {
	msg := m.msgs[l.Message.ID]
	return msg.status == outbox.Leased && msg.token == l.Token
}

func (m *outboxMachine) pickLease(t *rapid.T) (outbox.Lease, bool) {
	if len(m.leases) == 0 {
		return outbox.Lease{}, false
	}
	return m.leases[rapid.IntRange(0, len(m.leases)-1).Draw(t, "lease")], true
}

func (m *outboxMachine) Heartbeat(t *rapid.T) {
	l, ok := m.pickLease(t)
	if !ok {
		t.Skip("no lease")
	}
	d := time.Duration(rapid.IntRange(1, 60).Draw(t, "extend_s")) * time.Second
	var errs []error
	err := m.db.Update(context.Background(), func(tx *chain.Tx) error {
		var err error
		errs, err = outbox.HeartbeatTx(tx, modelTenant, l.Message.Topic, outbox.RecordOptions{Worker: "w", Now: m.clock.Now()}, d, []outbox.Lease{l})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if m.current(l) != (errs[0] == nil) || errs[0] != nil && !errors.Is(errs[0], outbox.ErrLeaseLost) {
		t.Fatalf("heartbeat of lease %d (current %v): %v", l.Token, m.current(l), errs[0])
	}
	if errs[0] == nil {
		m.msgs[l.Message.ID].due = m.clock.Now().Add(d)
	}
}

func (m *outboxMachine) Succeed(t *rapid.T) { m.finish(t, nil) }
func (m *outboxMachine) Fail(t *rapid.T)    { m.finish(t, errors.New("503 from the gateway")) }
func (m *outboxMachine) Reject(t *rapid.T) {
	m.finish(t, outbox.Permanent(errors.New("422 unknown customer")))
}

func (m *outboxMachine) finish(t *rapid.T, outcome error) {
	l, ok := m.pickLease(t)
	if !ok {
		t.Skip("no lease")
	}
	now := m.clock.Now()
	var rec outbox.Recorded
	err := m.db.Update(context.Background(), func(tx *chain.Tx) error {
		var err error
		rec, err = outbox.RecordTx(tx, modelTenant, l.Message.Topic, outbox.RecordOptions{Worker: "w", Now: now, Policy: modelPolicy},
			[]outbox.Outcome{outcomeOf(l, outcome)})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	errs := rec.Errs
	if !m.current(l) {
		if !errors.Is(errs[0], outbox.ErrLeaseLost) {
			t.Fatalf("outcome of stale lease %d: %v, want ErrLeaseLost", l.Token, errs[0])
		}
		return
	}
	if errs[0] != nil {
		t.Fatalf("outcome of current lease %d: %v", l.Token, errs[0])
	}
	msg := m.msgs[l.Message.ID]
	switch {
	case outcome == nil:
		msg.status = outbox.Done
	case errors.Is(outcome, outbox.ErrPermanent), msg.attempts >= modelMaxAttempts:
		msg.status = outbox.Dead
	default:
		info, err := outbox.Get(context.Background(), m.db, modelTenant, msg.id)
		if err != nil {
			t.Fatal(err)
		}
		backoff := modelPolicy.BackoffMin << (msg.attempts - 1)
		if wait := info.Due.Sub(now); wait < backoff/2 || wait > backoff {
			t.Fatalf("retry of attempt %d after %v, want %v..%v", msg.attempts, wait, backoff/2, backoff)
		}
		msg.status, msg.due = outbox.Pending, info.Due
		if info.Due.Sub(msg.ageFrom) > modelMaxAge {
			msg.status = outbox.Dead
		}
	}
}

func (m *outboxMachine) Advance(t *rapid.T) {
	d := time.Duration(rapid.IntRange(1, 90).Draw(t, "seconds")) * time.Second
	if rapid.IntRange(0, 30).Draw(t, "long") == 0 {
		d = modelMaxAge
	}
	m.clock.Advance(d)
}

func (m *outboxMachine) Requeue(t *rapid.T) {
	var dead []outbox.ID
	for _, msg := range m.msgs {
		if msg.status == outbox.Dead {
			dead = append(dead, msg.id)
		}
	}
	id := outbox.MessageID(modelTenant, "email", "k1")
	if len(dead) > 0 {
		slices.SortFunc(dead, func(a, b outbox.ID) int { return cmp.Compare(a.String(), b.String()) })
		id = rapid.SampledFrom(dead).Draw(t, "dead")
	}
	err := outbox.Requeue(context.Background(), m.db, modelTenant, []outbox.ID{id}, outbox.RequeueOptions{Operator: "ops", Reason: "fixed"})
	msg := m.msgs[id]
	switch {
	case msg == nil:
		if !outbox.IsUnknown(err) {
			t.Fatalf("requeue of an unknown message: %v", err)
		}
	case msg.status != outbox.Dead:
		if !errors.Is(err, outbox.ErrNotDead) {
			t.Fatalf("requeue of a %s message: %v", msg.status, err)
		}
	case err != nil:
		t.Fatalf("requeue: %v", err)
	default:
		now := m.clock.Now()
		msg.status, msg.attempts, msg.ageFrom, msg.due = outbox.Pending, 0, now, now
	}
}

// Crash closes and reopens the ledger: everything committed survives.
func (m *outboxMachine) Crash(t *rapid.T) {
	if err := m.db.Close(); err != nil {
		t.Fatal(err)
	}
	m.db = openBolt(t, m.path, m.clock.Now)
}

func (m *outboxMachine) Check(t *rapid.T) {
	ctx := context.Background()
	for _, msg := range m.msgs {
		info, err := outbox.Get(ctx, m.db, modelTenant, msg.id)
		if err != nil {
			t.Fatalf("get %s: %v", msg.key, err)
		}
		if info.Status != msg.status || info.Attempts != msg.attempts {
			t.Fatalf("%s/%s: %s after %d attempts, want %s after %d", msg.topic, msg.key, info.Status, info.Attempts, msg.status, msg.attempts)
		}
		if (msg.status == outbox.Pending || msg.status == outbox.Leased) && !info.Due.Equal(msg.due) {
			t.Fatalf("%s/%s due %v, want %v", msg.topic, msg.key, info.Due, msg.due)
		}
	}
	failures, err := outbox.Check(ctx, m.db)
	if err != nil || len(failures) > 0 {
		t.Fatalf("check: %v %v", failures, err)
	}
	for _, topic := range modelTopics {
		stats, err := outbox.Stats(ctx, m.db, modelTenant, topic)
		if err != nil {
			t.Fatal(err)
		}
		var want [5]int64
		for _, msg := range m.sorted(topic) {
			want[msg.status]++
		}
		if len(stats) == 1 {
			s := stats[0]
			if got := [5]int64{0, s.Pending, s.Leased, s.Done, s.Dead}; got != want {
				t.Fatalf("stats of %s: %v, want %v", topic, got, want)
			}
		}
	}
}

// Rebuild replaces the state with the one the chains give: nothing changes.
func (m *outboxMachine) Rebuild(t *rapid.T) {
	stats, err := outbox.Rebuild(context.Background(), m.db)
	if err != nil || len(stats.Failures) > 0 {
		t.Fatalf("rebuild: %+v %v", stats, err)
	}
}

func TestOutboxStateMachine(t *testing.T) {
	dir := t.TempDir()
	runs := 0
	rapid.Check(t, func(rt *rapid.T) {
		runs++
		m := &outboxMachine{path: fmt.Sprintf("%s/ledger-%d.db", dir, runs)}
		m.init(rt)
		defer func() { m.db.Close() }()
		rt.Repeat(rapid.StateMachineActions(m))
	})
}
