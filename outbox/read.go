package outbox

import (
	"context"
	"fmt"
	"iter"
	"time"

	"github.com/ledgerworks/ledger/chain"
)

// Info is a message with its delivery state.
type Info struct {
	Message  Message
	Status   Status
	Attempts int
	// Due is the next attempt's time when pending, the lease's deadline
	// when leased.
	Due time.Time
	// Token and Worker are the current (or last) lease's.
	Token  uint64
	Worker string
}

func infoOf(tx *chain.Tx, tenant string, id ID, r *record) (Info, error) {
	messages, _ := MessagesChain(tenant, r.Topic)
	m, err := readMessage(tx, tenant, r.Topic, messages, r.Seq)
	if err != nil {
		return Info{}, err
	}
	if m.ID != id {
		return Info{}, fmt.Errorf("outbox: record of %s names the entry of %s", id, m.ID)
	}
	return Info{Message: m, Status: r.Status, Attempts: int(r.Attempts), Due: time.Unix(0, r.Due), Token: r.Token, Worker: r.Worker}, nil
}

// GetTx returns a message and its state.
func GetTx(tx *chain.Tx, tenant string, id ID) (Info, error) {
	r, err := getRecord(newTxState(tx), tenant, id)
	if err != nil {
		return Info{}, err
	}
	return infoOf(tx, tenant, id, &r)
}

// Get is GetTx in a read transaction.
func Get(ctx context.Context, db *chain.DB, tenant string, id ID) (Info, error) {
	var info Info
	err := db.View(ctx, func(tx *chain.Tx) error {
		var err error
		info, err = GetTx(tx, tenant, id)
		return err
	})
	return info, err
}

// ListOptions select messages. The zero value lists every message of the
// tenant that is not done, in at most ListLimitDefault rows.
type ListOptions struct {
	// Topic limits the list to one topic; every topic when empty.
	Topic string
	// Status limits the list to one status; 0 lists pending, leased and
	// dead messages (everything but done).
	Status Status
	// Limit bounds the rows; ListLimitDefault when zero.
	Limit int
}

// ListLimitDefault is the rows List returns when ListOptions.Limit is 0.
const ListLimitDefault = 1000

// List returns messages of a tenant in topic and enqueue order.
func List(ctx context.Context, db *chain.DB, tenant string, o ListOptions) ([]Info, error) {
	if o.Limit <= 0 {
		o.Limit = ListLimitDefault
	}
	var out []Info
	err := db.View(ctx, func(tx *chain.Tx) error {
		out = out[:0]
		topics, err := topicsTx(tx, tenant, o.Topic)
		if err != nil {
			return err
		}
		for _, topic := range topics {
			messages, _ := MessagesChain(tenant, topic)
			for e, err := range tx.Entries(messages, 1) {
				if err != nil {
					return err
				}
				id := MessageID(tenant, topic, e.IdempotencyKey)
				r, err := getRecord(newTxState(tx), tenant, id)
				if err != nil {
					return err
				}
				if o.Status == 0 && r.Status == Done || o.Status != 0 && r.Status != o.Status {
					continue
				}
				info, err := infoOf(tx, tenant, id, &r)
				if err != nil {
					return err
				}
				out = append(out, info)
				if len(out) == o.Limit {
					return nil
				}
			}
		}
		return nil
	})
	return out, err
}

// ListDead lists the dead messages of a tenant (of one topic, when named).
func ListDead(ctx context.Context, db *chain.DB, tenant, topic string) ([]Info, error) {
	infos, _, err := ListDeadPage(ctx, db, tenant, DeadOptions{Topic: topic})
	return infos, err
}

// DeadOptions select a page of dead letters. The zero value lists every
// dead letter of the tenant.
type DeadOptions struct {
	// Topic limits the page to one topic; every topic when empty.
	Topic string
	// From is the first dead letter of the page (a previous page's next);
	// the zero ID starts at the first.
	From ID
	// Fits is asked about each dead letter, in order, before it joins the
	// page; the first one it refuses is the next page's From, except the
	// page's first, which joins it whatever Fits says. Nil takes every one.
	Fits func(Info) bool
}

// ListDeadPage lists the dead messages of a tenant in topic and
// dead-letter order, a page at a time: from o.From until o.Fits refuses
// one, whose id it returns as next (the zero ID when the list ended). A
// From that is no longer dead (requeued since) still marks the place.
func ListDeadPage(ctx context.Context, db *chain.DB, tenant string, o DeadOptions) (page []Info, next ID, err error) {
	err = db.View(ctx, func(tx *chain.Tx) error {
		page, next = page[:0], ID{}
		topics, err := topicsTx(tx, tenant, o.Topic)
		if err != nil {
			return err
		}
		var fromTopic string
		var fromSeq uint64
		if o.From != (ID{}) {
			r, err := getRecord(newTxState(tx), tenant, o.From)
			if err != nil {
				return err
			}
			fromTopic, fromSeq = r.Topic, r.Seq
		}
		for _, t := range topics {
			if t < fromTopic {
				continue
			}
			start := topicPrefix(tenant, stateDead, t)
			end := prefixEnd(start)
			if t == fromTopic {
				start = deadKey(tenant, t, fromSeq)
			}
			for kv, err := range tx.StateScan(start, end, false) {
				if err != nil {
					return err
				}
				var id ID
				copy(id[:], kv.Value)
				info, err := GetTx(tx, tenant, id)
				if err != nil {
					return err
				}
				if o.Fits != nil && !o.Fits(info) && len(page) > 0 {
					next = id
					return nil
				}
				page = append(page, info)
			}
		}
		return nil
	})
	return page, next, err
}

// topicsTx returns the tenant's topics in name order (only the named one,
// when topic is set and exists).
func topicsTx(tx *chain.Tx, tenant, topic string) ([]string, error) {
	if topic != "" {
		if err := validateNames(tenant, topic); err != nil {
			return nil, err
		}
		messages, _ := MessagesChain(tenant, topic)
		if _, err := tx.Head(messages); err != nil {
			if isNotFound(err) {
				return nil, nil
			}
			return nil, err
		}
		return []string{topic}, nil
	}
	if _, err := chain.ScopedName(tenant, Domain); err != nil {
		return nil, invalid("tenant", ErrInvalidName, "tenant %q: %v", tenant, err)
	}
	prefix := tenant + "/" + Domain + "/"
	var topics []string
	for h, err := range tx.Chains(prefix) {
		if err != nil {
			return nil, err
		}
		if len(h.Chain) < len(prefix) || h.Chain[:len(prefix)] != prefix {
			break
		}
		if t, tp, deliveries, ok := ParseChain(h.Chain); ok && t == tenant && !deliveries {
			topics = append(topics, tp)
		}
	}
	return topics, nil
}

// TopicStats counts a topic's messages by status.
type TopicStats struct {
	Tenant, Topic               string
	Enqueued                    int64 // every message ever enqueued
	Pending, Leased, Dead, Done int64
	// Waiting counts pending messages held back behind an earlier one of
	// their ordering key.
	Waiting int64
	// OldestPending is the enqueue time of the oldest pending or leased
	// message; zero when there is none.
	OldestPending time.Time
	// BlockedKeys are ordering keys whose oldest message is dead or has
	// failed at least once: the messages behind it wait.
	BlockedKeys []BlockedKey
	// Deliveries is the length of the deliveries chain: leases,
	// heartbeats, outcomes, dead letters and requeues recorded.
	Deliveries uint64
}

// BlockedKey is an ordering key held back by its oldest message.
type BlockedKey struct {
	OrderingKey string
	Message     ID
	Status      Status
	Attempts    int
	// Behind counts the messages waiting behind it.
	Behind int64
}

// Stats counts the messages of every topic of the tenant (or of one).
// It reads every message's record: it is for operators, not a hot path.
func Stats(ctx context.Context, db *chain.DB, tenant, topic string) ([]TopicStats, error) {
	var out []TopicStats
	err := db.View(ctx, func(tx *chain.Tx) error {
		out = out[:0]
		topics, err := topicsTx(tx, tenant, topic)
		if err != nil {
			return err
		}
		for _, t := range topics {
			s, err := topicStatsTx(tx, tenant, t)
			if err != nil {
				return err
			}
			out = append(out, s)
		}
		return nil
	})
	return out, err
}

func topicStatsTx(tx *chain.Tx, tenant, topic string) (TopicStats, error) {
	s := TopicStats{Tenant: tenant, Topic: topic}
	messages, _ := MessagesChain(tenant, topic)
	deliveries, _ := DeliveriesChain(tenant, topic)
	if h, err := tx.Head(deliveries); err == nil {
		s.Deliveries = h.Seq
	} else if !isNotFound(err) {
		return s, err
	}
	st := newTxState(tx)
	keys := map[string]*BlockedKey{}
	var order []string
	for e, err := range tx.Entries(messages, 1) {
		if err != nil {
			return s, err
		}
		s.Enqueued++
		id := MessageID(tenant, topic, e.IdempotencyKey)
		r, err := getRecord(st, tenant, id)
		if err != nil {
			return s, err
		}
		switch r.Status {
		case Pending:
			s.Pending++
		case Leased:
			s.Leased++
		case Dead:
			s.Dead++
		case Done:
			s.Done++
		}
		if (r.Status == Pending || r.Status == Leased) && s.OldestPending.IsZero() {
			s.OldestPending = time.Unix(0, r.EnqueuedAt)
		}
		if r.OrderingKey == "" || r.Status == Done {
			continue
		}
		if b := keys[r.OrderingKey]; b != nil {
			b.Behind++
			if r.Status == Pending {
				s.Waiting++
			}
			continue
		}
		keys[r.OrderingKey] = &BlockedKey{OrderingKey: r.OrderingKey, Message: id, Status: r.Status, Attempts: int(r.Attempts)}
		order = append(order, r.OrderingKey)
	}
	for _, k := range order {
		b := keys[k]
		if b.Status == Dead || b.Attempts > 0 && b.Status == Pending {
			s.BlockedKeys = append(s.BlockedKeys, *b)
		}
	}
	return s, nil
}

// History yields the entries of a topic's deliveries chain that concern
// the message, decoded, in order: its leases, heartbeats, outcomes, dead
// letters and requeues. With the message's enqueue entry it is the whole
// record of what happened to it.
func History(ctx context.Context, db *chain.DB, tenant string, id ID) iter.Seq2[Event, error] {
	return func(yield func(Event, error) bool) {
		var info Info
		err := db.View(ctx, func(tx *chain.Tx) error {
			var err error
			info, err = GetTx(tx, tenant, id)
			return err
		})
		if err != nil {
			yield(Event{}, err)
			return
		}
		deliveries, _ := DeliveriesChain(tenant, info.Message.Topic)
		for e, err := range db.Entries(ctx, deliveries, 1) {
			if err != nil {
				yield(Event{}, err)
				return
			}
			ev, ok, err := eventFor(&e, id)
			if err != nil {
				yield(Event{}, err)
				return
			}
			if ok && !yield(ev, nil) {
				return
			}
		}
	}
}

// Event is one recorded step of a message's delivery.
type Event struct {
	// Seq and Time are the deliveries chain entry's.
	Seq  uint64
	Time time.Time
	// Type is the entry's payload type (TypeLease, TypeOutcome, …).
	Type string
	// Worker is the lease holder (lease, heartbeat, outcome) or the
	// operator (requeue).
	Worker string
	// Attempt is set on leases and outcomes.
	Attempt int
	// Token is the lease's fencing token (its entry's seq).
	Token uint64
	// Deadline is a lease's or heartbeat's.
	Deadline time.Time
	// Outcome and Detail are an outcome's; Detail is also a dead
	// letter's or a requeue's reason.
	Outcome OutcomeKind
	Detail  string
	// NextAttempt is a failed attempt's retry time.
	NextAttempt time.Time
	Duration    time.Duration
	DeadReason  DeadReason
}

func eventFor(e *chain.Entry, id ID) (Event, bool, error) {
	base := Event{Seq: e.Seq, Time: time.Unix(0, e.TimeUnixNano), Type: e.Type}
	switch e.Type {
	case TypeLease:
		l, err := decodeLease(e.Payload)
		for _, it := range l.Items {
			if it.ID == id {
				base.Worker, base.Attempt, base.Token, base.Deadline = l.Worker, int(it.Attempt), e.Seq, time.Unix(0, l.Deadline)
				return base, true, err
			}
		}
		return base, false, err
	case TypeHeartbeat:
		h, err := decodeHeartbeat(e.Payload)
		for _, it := range h.Items {
			if it.ID == id {
				base.Worker, base.Token, base.Deadline = h.Worker, it.Token, time.Unix(0, h.Deadline)
				return base, true, err
			}
		}
		return base, false, err
	case TypeOutcome:
		o, err := decodeOutcome(e.Payload)
		for _, it := range o.Items {
			if it.ID == id {
				base.Worker, base.Token, base.Attempt, base.Outcome, base.Detail = o.Worker, it.Token, int(it.Attempt), it.Kind, it.Detail
				base.Duration = time.Duration(it.Duration)
				if it.Kind == Failed {
					base.NextAttempt = time.Unix(0, it.NextAttempt)
				}
				return base, true, err
			}
		}
		return base, false, err
	case TypeDead:
		d, err := decodeDead(e.Payload)
		for _, it := range d.Items {
			if it.ID == id {
				base.DeadReason, base.Detail = it.Reason, it.Detail
				return base, true, err
			}
		}
		return base, false, err
	case TypeRequeue:
		q, err := decodeRequeue(e.Payload)
		for _, it := range q.Items {
			if it == id {
				base.Worker, base.Detail = q.Operator, q.Reason
				return base, true, err
			}
		}
		return base, false, err
	}
	return base, false, fmt.Errorf("%w: type %q on a deliveries chain", errDecode, e.Type)
}
