package outbox

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/ledgerworks/ledger/chain"
)

// Policy is a topic's delivery rules. The zero value uses the defaults.
type Policy struct {
	// MaxAttempts is how many attempts a message gets before it is dead;
	// MaxAttemptsDefault when zero.
	MaxAttempts int
	// MaxAge is how long after its enqueue (or its last requeue) a message
	// may still be attempted; MaxAgeDefault when zero.
	MaxAge time.Duration
	// BackoffMin and BackoffMax bound the wait before a retry: attempt n
	// waits BackoffMin·2^(n-1), at most BackoffMax, less a random part of
	// up to half (jitter), so that failed messages do not return together.
	// BackoffMinDefault and BackoffMaxDefault when zero.
	BackoffMin, BackoffMax time.Duration
}

func (p Policy) withDefaults() Policy {
	if p.MaxAttempts <= 0 {
		p.MaxAttempts = MaxAttemptsDefault
	}
	if p.MaxAge <= 0 {
		p.MaxAge = MaxAgeDefault
	}
	if p.BackoffMin <= 0 {
		p.BackoffMin = BackoffMinDefault
	}
	if p.BackoffMax <= 0 {
		p.BackoffMax = BackoffMaxDefault
	}
	if p.BackoffMax < p.BackoffMin {
		p.BackoffMax = p.BackoffMin
	}
	return p
}

// Backoff returns the wait before the retry that follows the failed
// attempt (from 1), jitter included.
func (p Policy) Backoff(attempt int) time.Duration {
	p = p.withDefaults()
	d := p.BackoffMax
	if attempt < 1 {
		attempt = 1
	}
	if attempt <= 62 {
		if grown := p.BackoffMin << (attempt - 1); grown > 0 && grown < p.BackoffMax && grown>>(attempt-1) == p.BackoffMin {
			d = grown
		}
	}
	return d - time.Duration(rand.Int64N(int64(d/2)+1))
}

// Message is an enqueued message as a worker receives it.
type Message struct {
	ID ID
	// Key is the idempotency key of every attempt: "outbox:" + ID.
	Key            string
	Tenant, Topic  string
	IdempotencyKey string // the enqueue's key
	OrderingKey    string
	Headers        []Header
	Payload        []byte
	EnqueuedAt     time.Time
	// Seq is the enqueue's seq on the topic's messages chain.
	Seq uint64
	// TraceParent is the W3C traceparent of the span that enqueued the
	// message, or "" when none was recording; each delivery attempt's
	// span links to it.
	TraceParent string
}

// Header returns the value of the named header, or "".
func (m *Message) Header(name string) string {
	for _, h := range m.Headers {
		if h.Name == name {
			return h.Value
		}
	}
	return ""
}

// Lease is a message leased to a worker for one attempt.
type Lease struct {
	Message Message
	// Attempt counts from 1.
	Attempt int
	// Token is the lease's fencing token: the seq of its lease entry on
	// the deliveries chain. Outcomes and heartbeats name it; only the
	// current lease's are accepted.
	Token    uint64
	Deadline time.Time
}

// ClaimOptions are the arguments of a claim. Worker is required.
type ClaimOptions struct {
	// Worker names the claiming worker on the lease entry.
	Worker string
	// Max is the most messages to lease, 1..ClaimBatchMax; 1 when zero.
	Max int
	// LeaseDuration is how long the leases last, LeaseDurationMin..
	// LeaseDurationMax; LeaseDurationDefault when zero.
	LeaseDuration time.Duration
	// Now is the time the claim runs at; time.Now() when zero.
	Now time.Time
	// Policy is the topic's: a message past its MaxAge or its MaxAttempts
	// is dead-lettered instead of leased.
	Policy Policy
}

// Claim is what a claim leased and dead-lettered.
type Claim struct {
	Leases []Lease
	// Dead are the due messages dead-lettered instead (age or attempts).
	Dead []DeadLetter
	// Expired counts leases that had expired and were taken over.
	Expired int
	// NextDue is when the next message not claimed now is due; the zero
	// time when none is waiting, or when Max were claimed.
	NextDue time.Time
}

func validWorker(worker string) error {
	return validText("worker", worker, 1, WorkerIDLengthMax, ErrInvalidOptions)
}

// ClaimTx leases up to o.Max due messages of the topic to o.Worker: pending
// messages whose next attempt is due, and leased ones whose lease expired.
// Of an ordering key only the oldest undelivered message is ever due. One
// lease entry records them all; its seq is their fencing token.
func ClaimTx(tx *chain.Tx, tenant, topic string, o ClaimOptions) (Claim, error) {
	c, err := claimTx(tx, tenant, topic, o)
	if err != nil {
		return Claim{}, err
	}
	messages, _ := MessagesChain(tenant, topic)
	if err := readMessages(tx, tenant, topic, messages, c.Leases); err != nil {
		return Claim{}, err
	}
	return c, nil
}

// claimTx is ClaimTx without reading the messages: each lease's Message
// holds only its ID and Seq, for readMessages to fill in. The enqueues are
// committed and never change, so a worker reads them after the claim's
// commit, in a read transaction, outside the writer that every claim and
// outcome goes through.
func claimTx(tx *chain.Tx, tenant, topic string, o ClaimOptions) (Claim, error) {
	if err := validateNames(tenant, topic); err != nil {
		return Claim{}, err
	}
	if err := validWorker(o.Worker); err != nil {
		return Claim{}, err
	}
	if o.Max == 0 {
		o.Max = 1
	}
	if o.Max < 1 || o.Max > ClaimBatchMax {
		return Claim{}, invalid("max", ErrInvalidOptions, "claim of %d messages, want 1..%d", o.Max, ClaimBatchMax)
	}
	lease, err := leaseDuration(o.LeaseDuration)
	if err != nil {
		return Claim{}, err
	}
	now := o.Now
	if now.IsZero() {
		now = time.Now()
	}
	policy := o.Policy.withDefaults()
	deliveries, _ := DeliveriesChain(tenant, topic)
	if _, err := tx.Head(deliveries); err != nil && !isNotFound(err) { // the topic's lock (see EnqueueTx)
		return Claim{}, err
	}
	var claim Claim
	st := newTxStateSized(tx, o.Max)
	floor, hasFloor, err := readFloor(st, tenant, topic)
	if err != nil {
		return Claim{}, err
	}
	ready, nextReady, err := dueMessages(st, tenant, topic, floor, hasFloor, now.UnixNano(), o.Max)
	if err != nil {
		return Claim{}, err
	}
	expired, nextExpired, err := expiredLeases(st, tx, tenant, topic, deliveries, now.UnixNano(), o.Max)
	if err != nil {
		return Claim{}, err
	}
	due, taken, next := mergeDue(ready, expired, o.Max)
	// The claim takes the first taken ready keys from the floor on (every
	// message of due leaves the ready index, leased or dead); the first key
	// left is the next one the scan read, so the floor is known without a
	// scan over the keys this transaction deletes.
	settled := int64(floorEmpty)
	switch {
	case taken < len(ready):
		settled = ready[taken].due
	case nextReady != noneDue:
		settled = nextReady
	}
	for _, n := range []int64{nextReady, nextExpired} {
		if n != noneDue && (next == noneDue || n < next) {
			next = n
		}
	}
	if next != noneDue {
		claim.NextDue = time.Unix(0, next)
	}
	var dead deadEvent
	le := leaseEvent{Worker: o.Worker, Deadline: now.Add(lease).UnixNano()}
	records := make([]record, 0, len(due))
	for _, d := range due {
		id := d.id
		r, err := recordOf(st, tenant, topic, id)
		if err != nil {
			return Claim{}, err
		}
		switch {
		case now.UnixNano()-r.AgeFrom > int64(policy.MaxAge):
			dead.Items = append(dead.Items, deadItem{ID: id, Reason: DeadAge,
				Detail: fmt.Sprintf("older than %v after %d attempts", policy.MaxAge, r.Attempts)})
		case int(r.Attempts) >= policy.MaxAttempts:
			dead.Items = append(dead.Items, deadItem{ID: id, Reason: DeadAttempts,
				Detail: fmt.Sprintf("%d attempts used, the last one's lease expired", r.Attempts)})
		default:
			if r.Status == Leased {
				claim.Expired++
			}
			le.Items = append(le.Items, leaseItem{ID: id, Attempt: r.Attempts + 1})
			records = append(records, r)
		}
	}
	if len(dead.Items) > 0 {
		if err := appendDead(st, tenant, topic, deliveries, &dead); err != nil {
			return Claim{}, err
		}
		for _, it := range dead.Items {
			claim.Dead = append(claim.Dead, DeadLetter{ID: it.ID, Reason: it.Reason})
		}
	}
	if hasFloor && settled != floor {
		if err := st.put(floorKey(tenant, topic), encodeFloor(settled)); err != nil {
			return Claim{}, err
		}
	}
	if len(le.Items) == 0 {
		return claim, nil
	}
	res, err := tx.Append(chain.Request{Chain: deliveries, Type: TypeLease, Payload: le.encode()})
	if err != nil {
		return Claim{}, err
	}
	if err := applyLease(st, tenant, topic, &res.Entry, &le); err != nil {
		return Claim{}, err
	}
	claim.Leases = make([]Lease, len(le.Items))
	for i, it := range le.Items {
		claim.Leases[i] = Lease{Message: Message{ID: it.ID, Seq: records[i].Seq}, Attempt: int(it.Attempt),
			Token: res.Entry.Seq, Deadline: time.Unix(0, le.Deadline)}
	}
	return claim, nil
}

// readMessages fills in the leases' messages from their enqueues, named
// by each message's ID and Seq (from its record, which Check holds to the
// chains: the id is not derived again). When their seqs lie close together
// (a FIFO topic's claim: they mostly do) it reads the range between the
// lowest and the highest in one pass, which on PostgreSQL is a few paged
// queries instead of a round trip per message; otherwise one entry at a
// time.
func readMessages(tx *chain.Tx, tenant, topic, messages string, leases []Lease) error {
	if len(leases) == 0 {
		return nil
	}
	lo, hi := leases[0].Message.Seq, leases[0].Message.Seq
	for i := range leases {
		lo, hi = min(lo, leases[i].Message.Seq), max(hi, leases[i].Message.Seq)
	}
	if len(leases) == 1 || hi-lo+1 > 2*uint64(len(leases)) {
		for i := range leases {
			m := &leases[i].Message
			e, err := tx.Get(messages, m.Seq)
			if err != nil {
				return err
			}
			if err := fillMessage(m, tenant, topic, &e); err != nil {
				return err
			}
		}
		return nil
	}
	// Slots by seq: a dense table over [lo, hi], which holds at most twice
	// as many seqs as there are leases.
	slots := make([]int32, hi-lo+1)
	for i := range leases {
		slots[leases[i].Message.Seq-lo] = int32(i) + 1
	}
	found := 0
	for e, err := range tx.Entries(messages, lo) {
		if err != nil {
			return err
		}
		if e.Seq > hi {
			break
		}
		slot := slots[e.Seq-lo]
		if slot == 0 {
			continue
		}
		if err := fillMessage(&leases[slot-1].Message, tenant, topic, &e); err != nil {
			return err
		}
		if found++; found == len(leases) {
			break
		}
	}
	if found != len(leases) {
		return fmt.Errorf("outbox: %s holds %d of the %d enqueues its records name", messages, found, len(leases))
	}
	return nil
}

func leaseDuration(d time.Duration) (time.Duration, error) {
	if d == 0 {
		return LeaseDurationDefault, nil
	}
	if d < LeaseDurationMin || d > LeaseDurationMax {
		return 0, invalid("lease", ErrInvalidOptions, "lease of %v, want %v..%v", d, LeaseDurationMin, LeaseDurationMax)
	}
	return d, nil
}

// settleFloor sets the topic's floor to the due time of its first ready
// key, or floorEmpty when it has none, after an operation that deleted or
// moved ready keys. It reads from the current floor, so it steps only over
// the keys the operation itself deleted.
func settleFloor(st txState, tx *chain.Tx, tenant, topic string) error {
	floor, hasFloor, err := readFloor(st, tenant, topic)
	if err != nil || !hasFloor {
		return err
	}
	start := topicPrefix(tenant, stateReady, topic)
	first := int64(floorEmpty)
	for kv, err := range tx.StateScan(readyKey(tenant, topic, floor, 0), prefixEnd(start), false) {
		if err != nil {
			return err
		}
		if due, ok := decodeFloor(kv.Key[len(start):][:8]); ok && len(kv.Key) == len(start)+16 {
			first = due
		}
		break
	}
	if first == floor {
		return nil
	}
	return st.put(floorKey(tenant, topic), encodeFloor(first))
}

// dueRef is a message a claim may take: due at due, enqueued at seq.
type dueRef struct {
	due int64
	seq uint64
	id  ID
}

// noneDue is the next due time when nothing waits.
const noneDue = math.MinInt64

func dueLess(a, b dueRef) bool { return a.due < b.due || a.due == b.due && a.seq < b.seq }

// mergeDue merges the due pending messages and the expired leases, both in
// (due, seq) order, into the first max of both in that order, and returns
// how many of ready it took and the due time of the first one left out
// (noneDue when none is).
func mergeDue(ready, expired []dueRef, max int) ([]dueRef, int, int64) {
	out := make([]dueRef, 0, min(max, len(ready)+len(expired)))
	i, j := 0, 0
	for len(out) < max && (i < len(ready) || j < len(expired)) {
		if j == len(expired) || i < len(ready) && dueLess(ready[i], expired[j]) {
			out, i = append(out, ready[i]), i+1
		} else {
			out, j = append(out, expired[j]), j+1
		}
	}
	next := int64(noneDue)
	if i < len(ready) {
		next = ready[i].due
	}
	if j < len(expired) && (next == noneDue || expired[j].due < next) {
		next = expired[j].due
	}
	return out, i, next
}

// dueMessages returns, in (due, seq) order, up to max pending messages of
// the topic's ready index due at now, read from the floor when it has one,
// and the due time of the first one not taken (noneDue when none waits).
// The records the ready keys carry go into st's cache, so that the claim
// reads them with the index instead of one at a time.
func dueMessages(st txState, tenant, topic string, floor int64, hasFloor bool, now int64, max int) ([]dueRef, int64, error) {
	start := topicPrefix(tenant, stateReady, topic)
	from := start
	if hasFloor {
		from = readyKey(tenant, topic, floor, 0)
	}
	refs := make([]dueRef, 0, min(max, 64))
	next := int64(noneDue)
	for kv, err := range st.tx.StateScan(from, prefixEnd(start), false) {
		if err != nil {
			return nil, next, err
		}
		rest := kv.Key[len(start):]
		id, rec, ok := splitReadyValue(kv.Value)
		if len(rest) != 16 || !ok {
			return nil, next, fmt.Errorf("outbox: malformed ready key %x", kv.Key)
		}
		due := int64(binary.BigEndian.Uint64(rest) ^ (1 << 63))
		if due > now || len(refs) == max {
			next = due
			break
		}
		refs = append(refs, dueRef{due: due, seq: binary.BigEndian.Uint64(rest[8:]), id: id})
		if rec != nil {
			if err := rememberRecord(st, id, rec); err != nil {
				return nil, next, err
			}
		}
	}
	return refs, next, nil
}

// expiredLeases returns, in (deadline, seq) order, at least the first max
// leased messages of the topic whose lease expired at now (more when
// leases share a deadline), and the deadline of the first lease not read
// (noneDue when none is left). A lease index key names the lease or
// heartbeat entry whose deadline its messages hold; of the entry's items,
// those whose record still holds that deadline from that entry are
// expired.
func expiredLeases(st txState, tx *chain.Tx, tenant, topic, deliveries string, now int64, max int) ([]dueRef, int64, error) {
	start := topicPrefix(tenant, stateLease, topic)
	var refs []dueRef
	next := int64(noneDue)
	for kv, err := range tx.StateScan(start, prefixEnd(start), false) {
		if err != nil {
			return nil, next, err
		}
		rest := kv.Key[len(start):]
		if len(rest) != 16 {
			return nil, next, fmt.Errorf("outbox: malformed lease index key %x", kv.Key)
		}
		deadline := int64(binary.BigEndian.Uint64(rest) ^ (1 << 63))
		if deadline > now || len(refs) >= max && deadline > refs[len(refs)-1].due {
			next = deadline
			break
		}
		if len(kv.Value) != 8 {
			return nil, next, fmt.Errorf("outbox: lease index key %x holds %d bytes", kv.Key, len(kv.Value))
		}
		group, held := binary.BigEndian.Uint64(rest[8:]), binary.BigEndian.Uint64(kv.Value)
		ids, err := leaseEntryItems(tx, deliveries, group)
		if err != nil {
			return nil, next, err
		}
		for i, found := 0, uint64(0); i < len(ids) && found < held; i++ { // the count ends the search
			r, err := recordOf(st, tenant, topic, ids[i])
			if err != nil {
				return nil, next, err
			}
			if r.Status == Leased && r.Group == group && r.Due == deadline {
				refs = append(refs, dueRef{due: deadline, seq: r.Seq, id: ids[i]})
				found++
			}
		}
	}
	slices.SortFunc(refs, func(a, b dueRef) int { return cmp.Or(cmp.Compare(a.due, b.due), cmp.Compare(a.seq, b.seq)) })
	return refs, next, nil
}

// leaseEntryItems reads the message ids of a lease or heartbeat entry.
func leaseEntryItems(tx *chain.Tx, deliveries string, seq uint64) ([]ID, error) {
	e, err := tx.Get(deliveries, seq)
	if err != nil {
		return nil, err
	}
	var ids []ID
	switch e.Type {
	case TypeLease:
		l, err := decodeLease(e.Payload)
		if err != nil {
			return nil, fmt.Errorf("entry %s seq %d: %w", deliveries, seq, err)
		}
		for _, it := range l.Items {
			ids = append(ids, it.ID)
		}
	case TypeHeartbeat:
		h, err := decodeHeartbeat(e.Payload)
		if err != nil {
			return nil, fmt.Errorf("entry %s seq %d: %w", deliveries, seq, err)
		}
		for _, it := range h.Items {
			ids = append(ids, it.ID)
		}
	default:
		return nil, fmt.Errorf("outbox: lease index names %s seq %d of type %q", deliveries, seq, e.Type)
	}
	return ids, nil
}

// readMessage reads an enqueued message from its chain.
func readMessage(tx *chain.Tx, tenant, topic, messages string, seq uint64) (Message, error) {
	e, err := tx.Get(messages, seq)
	if err != nil {
		return Message{}, err
	}
	return messageOf(tenant, topic, &e)
}

func messageOf(tenant, topic string, e *chain.Entry) (Message, error) {
	m := Message{ID: MessageID(tenant, topic, e.IdempotencyKey)}
	err := fillMessage(&m, tenant, topic, e)
	return m, err
}

// fillMessage sets the fields of a message with a known id from its
// enqueue.
func fillMessage(m *Message, tenant, topic string, e *chain.Entry) error {
	if e.Type != TypeMessage {
		return fmt.Errorf("%w: entry %s seq %d has type %q", errDecode, e.Chain, e.Seq, e.Type)
	}
	ev, err := decodeMessage(e.Payload)
	if err != nil {
		return fmt.Errorf("entry %s seq %d: %w", e.Chain, e.Seq, err)
	}
	*m = Message{ID: m.ID, Key: m.ID.Key(), Tenant: tenant, Topic: topic, IdempotencyKey: e.IdempotencyKey,
		OrderingKey: ev.OrderingKey, Headers: ev.Headers, Payload: ev.Payload, EnqueuedAt: time.Unix(0, e.TimeUnixNano), Seq: e.Seq,
		TraceParent: ev.TraceParent}
	return nil
}

// appendDead records dead letters and applies them through st, the
// operation's own state, so that its caches stay true.
func appendDead(st txState, tenant, topic, deliveries string, d *deadEvent) error {
	if _, err := st.tx.Append(chain.Request{Chain: deliveries, Type: TypeDead, Payload: d.encode()}); err != nil {
		return err
	}
	return applyDead(st, tenant, topic, d)
}

// DeadLetter names a message that was dead-lettered, and why.
type DeadLetter struct {
	ID     ID
	Reason DeadReason
}

// Outcome is what one attempt returned, reported by the lease's holder.
type Outcome struct {
	ID    ID
	Token uint64
	// Attempt is the lease's attempt number.
	Attempt int
	// Err is nil for a delivery, an error wrapping ErrPermanent for a
	// permanent failure (dead letter) and any other error for a transient
	// one (retry after Policy.Backoff).
	Err error
	// Detail is recorded with the outcome: the gateway's answer, say.
	// Err's text when empty.
	Detail   string
	Duration time.Duration
}

// RecordOptions are the arguments of RecordTx and HeartbeatTx. Worker is
// required.
type RecordOptions struct {
	Worker string
	// Now is the time of the record; time.Now() when zero.
	Now    time.Time
	Policy Policy
}

// Recorded is what RecordTx did with a batch of outcomes.
type Recorded struct {
	// Errs holds, for each outcome, nil or an error wrapping ErrLeaseLost.
	Errs []error
	// Dead are the messages the outcomes dead-lettered.
	Dead []DeadLetter
}

// RecordTx records the outcomes of attempts, in one outcome entry (and one
// dead-letter entry for the messages that die of them). The outcome of a
// lease that is no longer current is refused with ErrLeaseLost in its
// slot of Recorded.Errs, and nothing of it is recorded: a worker whose
// lease expired and was taken over cannot overwrite the newer attempt. The
// error is for the transaction as a whole.
func RecordTx(tx *chain.Tx, tenant, topic string, o RecordOptions, outcomes []Outcome) (Recorded, error) {
	if err := validateNames(tenant, topic); err != nil {
		return Recorded{}, err
	}
	if err := validWorker(o.Worker); err != nil {
		return Recorded{}, err
	}
	if len(outcomes) > OutcomeBatchMax {
		return Recorded{}, invalid("outcomes", ErrInvalidOptions, "%d outcomes, at most %d", len(outcomes), OutcomeBatchMax)
	}
	now := o.Now
	if now.IsZero() {
		now = time.Now()
	}
	policy := o.Policy.withDefaults()
	deliveries, _ := DeliveriesChain(tenant, topic)
	if _, err := tx.Head(deliveries); err != nil && !isNotFound(err) {
		return Recorded{}, err
	}
	st := newTxStateSized(tx, len(outcomes))
	ids := make([]ID, len(outcomes))
	for i, out := range outcomes {
		ids[i] = out.ID
	}
	if err := prefetchRecords(st, tenant, ids); err != nil {
		return Recorded{}, err
	}
	errs := make([]error, len(outcomes))
	ev := outcomeEvent{Worker: o.Worker, Items: make([]outcomeItem, 0, len(outcomes))}
	var dead deadEvent
	seen := make(map[ID]bool, len(outcomes))
	for i, out := range outcomes {
		r, err := recordOf(st, tenant, topic, out.ID)
		if err != nil {
			var te *transitionError
			if errors.As(err, &te) {
				errs[i] = fmt.Errorf("%w: %v", ErrLeaseLost, err)
				continue
			}
			return Recorded{}, err
		}
		if r.Status != Leased || r.Token != out.Token || int(r.Attempts) != out.Attempt || seen[out.ID] {
			errs[i] = fmt.Errorf("%w: message %s lease %d attempt %d (now %s, lease %d attempt %d)", ErrLeaseLost,
				out.ID, out.Token, out.Attempt, r.Status, r.Token, r.Attempts)
			continue
		}
		seen[out.ID] = true
		it := outcomeItem{ID: out.ID, Token: out.Token, Attempt: r.Attempts, Duration: int64(out.Duration),
			Detail: cut(out.Detail, DetailLengthMax)}
		if it.Detail == "" && out.Err != nil {
			it.Detail = cut(out.Err.Error(), DetailLengthMax)
		}
		switch {
		case out.Err == nil:
			it.Kind = Delivered
		case errors.Is(out.Err, ErrPermanent):
			it.Kind, it.NextAttempt = Rejected, now.UnixNano()
			dead.Items = append(dead.Items, deadItem{ID: out.ID, Reason: DeadRejected, Detail: it.Detail})
		default:
			it.Kind = Failed
			it.NextAttempt = now.Add(policy.Backoff(int(r.Attempts))).UnixNano()
			switch {
			case int(r.Attempts) >= policy.MaxAttempts:
				dead.Items = append(dead.Items, deadItem{ID: out.ID, Reason: DeadAttempts,
					Detail: fmt.Sprintf("%d attempts, the last: %s", r.Attempts, it.Detail)})
			case it.NextAttempt-r.AgeFrom > int64(policy.MaxAge):
				dead.Items = append(dead.Items, deadItem{ID: out.ID, Reason: DeadAge,
					Detail: fmt.Sprintf("the next attempt would be later than %v: %s", policy.MaxAge, it.Detail)})
			}
		}
		ev.Items = append(ev.Items, it)
	}
	if len(ev.Items) == 0 {
		return Recorded{Errs: errs}, nil
	}
	if _, err := tx.Append(chain.Request{Chain: deliveries, Type: TypeOutcome, Payload: ev.encode()}); err != nil {
		return Recorded{}, err
	}
	if err := applyOutcome(st, tenant, topic, &ev); err != nil {
		return Recorded{}, err
	}
	if len(dead.Items) > 0 {
		if err := appendDead(st, tenant, topic, deliveries, &dead); err != nil {
			return Recorded{}, err
		}
		// Only a dead letter deletes ready keys here (a failure's, put
		// just before); puts lower the floor as they go, so it stays
		// exact without them.
		if err := settleFloor(st, tx, tenant, topic); err != nil {
			return Recorded{}, err
		}
	}
	notify(tx, tenant, topic) // a delivered message may have made the next of its key ready
	rec := Recorded{Errs: errs}
	for _, it := range dead.Items {
		rec.Dead = append(rec.Dead, DeadLetter{ID: it.ID, Reason: it.Reason})
	}
	return rec, nil
}

// cut shortens s to at most n bytes at a rune boundary, and replaces
// control characters and invalid UTF-8, so that any text can be recorded.
func cut(s string, n int) string {
	s = string(bytes.ToValidUTF8([]byte(s), []byte("?")))
	b := []byte(s)
	for i, c := range b {
		if c < 0x20 || c == 0x7f {
			b[i] = ' '
		}
	}
	s = string(b)
	if len(s) <= n {
		return s
	}
	for n > 0 && (s[n]&0xc0) == 0x80 {
		n--
	}
	return s[:n]
}

// HeartbeatTx extends the named leases to now+lease, in one entry. A lease
// that is no longer current is refused with ErrLeaseLost in its slot.
func HeartbeatTx(tx *chain.Tx, tenant, topic string, o RecordOptions, lease time.Duration, leases []Lease) ([]error, error) {
	if err := validateNames(tenant, topic); err != nil {
		return nil, err
	}
	if err := validWorker(o.Worker); err != nil {
		return nil, err
	}
	if len(leases) > OutcomeBatchMax {
		return nil, invalid("leases", ErrInvalidOptions, "%d leases, at most %d", len(leases), OutcomeBatchMax)
	}
	lease, err := leaseDuration(lease)
	if err != nil {
		return nil, err
	}
	now := o.Now
	if now.IsZero() {
		now = time.Now()
	}
	deliveries, _ := DeliveriesChain(tenant, topic)
	if _, err := tx.Head(deliveries); err != nil && !isNotFound(err) {
		return nil, err
	}
	st := newTxStateSized(tx, len(leases))
	ids := make([]ID, len(leases))
	for i, l := range leases {
		ids[i] = l.Message.ID
	}
	if err := prefetchRecords(st, tenant, ids); err != nil {
		return nil, err
	}
	errs := make([]error, len(leases))
	ev := heartbeatEvent{Worker: o.Worker, Deadline: now.Add(lease).UnixNano()}
	seen := map[ID]bool{}
	for i, l := range leases {
		r, err := getRecord(st, tenant, l.Message.ID)
		if err != nil && !IsUnknown(err) {
			return nil, err
		}
		if err != nil || r.Topic != topic || r.Status != Leased || r.Token != l.Token || seen[l.Message.ID] {
			errs[i] = fmt.Errorf("%w: message %s lease %d", ErrLeaseLost, l.Message.ID, l.Token)
			continue
		}
		seen[l.Message.ID] = true
		ev.Items = append(ev.Items, tokenItem{ID: l.Message.ID, Token: l.Token})
	}
	if len(ev.Items) == 0 {
		return errs, nil
	}
	res, err := tx.Append(chain.Request{Chain: deliveries, Type: TypeHeartbeat, Payload: ev.encode()})
	if err != nil {
		return nil, err
	}
	return errs, applyHeartbeat(st, tenant, topic, &res.Entry, &ev) // it moves no ready key: the floor stays

}
