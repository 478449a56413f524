package outbox

import "slices"

// Header is one message header. A message's headers are sorted by name,
// each name once.
type Header struct {
	Name, Value string
}

// messageEvent is the payload of an enqueue (TypeMessage).
type messageEvent struct {
	OrderingKey string
	NotBefore   int64 // unix nanoseconds; 0: at once
	Headers     []Header
	Payload     []byte
	// TraceParent is the W3C traceparent of the span that enqueued the
	// message, or "". It is the encoding's last field and is written only
	// when set, so that a message without one encodes as before.
	TraceParent string
}

func (m *messageEvent) encode() []byte {
	e := newEncoder(32 + len(m.OrderingKey) + len(m.Payload) + 16*len(m.Headers))
	e.str(m.OrderingKey)
	e.i64(m.NotBefore)
	e.count(len(m.Headers))
	for _, h := range m.Headers {
		e.str(h.Name)
		e.str(h.Value)
	}
	e.bytes(m.Payload)
	if m.TraceParent != "" {
		e.str(m.TraceParent)
	}
	return e.result()
}

func decodeMessage(b []byte) (messageEvent, error) {
	d := newDecoder(b)
	var m messageEvent
	m.OrderingKey = d.str(OrderingKeyLengthMax)
	m.NotBefore = d.i64()
	if n := d.count(HeadersMax, 8); n > 0 {
		m.Headers = make([]Header, n)
		for i := range m.Headers {
			m.Headers[i] = Header{Name: d.str(HeaderNameLengthMax), Value: d.str(HeaderValueLengthMax)}
			if d.err == nil && i > 0 && m.Headers[i-1].Name >= m.Headers[i].Name {
				d.fail("headers not sorted by name, each once")
			}
		}
	}
	if p := d.bytes(PayloadSizeMax); len(p) > 0 {
		m.Payload = slices.Clone(p)
	}
	if d.err == nil && d.remaining() > 0 {
		m.TraceParent = d.str(traceParentLength)
		if d.err == nil && !validTraceParent(m.TraceParent) {
			d.fail("trace context %q is not a W3C traceparent", m.TraceParent)
		}
	}
	return m, d.end()
}

// leaseItem is one message of a lease: its attempt number, from 1.
type leaseItem struct {
	ID      ID
	Attempt uint32
}

// leaseEvent leases messages to a worker until Deadline (TypeLease). Its
// seq on the deliveries chain is the leases' fencing token.
type leaseEvent struct {
	Worker   string
	Deadline int64
	Items    []leaseItem
}

func (l *leaseEvent) encode() []byte {
	e := newEncoder(32 + len(l.Worker) + 20*len(l.Items))
	e.str(l.Worker)
	e.i64(l.Deadline)
	e.count(len(l.Items))
	for _, it := range l.Items {
		e.id(it.ID)
		e.u32(it.Attempt)
	}
	return e.result()
}

func decodeLease(b []byte) (leaseEvent, error) {
	d := newDecoder(b)
	var l leaseEvent
	l.Worker = d.str(WorkerIDLengthMax)
	l.Deadline = d.i64()
	l.Items = make([]leaseItem, d.count(ClaimBatchMax, IDSize+4))
	for i := range l.Items {
		l.Items[i] = leaseItem{ID: d.id(), Attempt: d.u32()}
	}
	return l, d.end()
}

// tokenItem names a message and the lease it is held under.
type tokenItem struct {
	ID    ID
	Token uint64
}

// heartbeatEvent extends leases to Deadline (TypeHeartbeat).
type heartbeatEvent struct {
	Worker   string
	Deadline int64
	Items    []tokenItem
}

func (h *heartbeatEvent) encode() []byte {
	e := newEncoder(32 + len(h.Worker) + 24*len(h.Items))
	e.str(h.Worker)
	e.i64(h.Deadline)
	e.count(len(h.Items))
	for _, it := range h.Items {
		e.id(it.ID)
		e.u64(it.Token)
	}
	return e.result()
}

func decodeHeartbeat(b []byte) (heartbeatEvent, error) {
	d := newDecoder(b)
	var h heartbeatEvent
	h.Worker = d.str(WorkerIDLengthMax)
	h.Deadline = d.i64()
	h.Items = make([]tokenItem, d.count(OutcomeBatchMax, IDSize+8))
	for i := range h.Items {
		h.Items[i] = tokenItem{ID: d.id(), Token: d.u64()}
	}
	return h, d.end()
}

// OutcomeKind is what one attempt came to.
type OutcomeKind uint8

const (
	// Delivered: the handler succeeded; the message is done.
	Delivered OutcomeKind = 1
	// Failed: the handler returned a transient error; the message is
	// retried at its next attempt time unless a dead letter follows.
	Failed OutcomeKind = 2
	// Rejected: the handler returned a permanent error; a dead letter
	// follows in the same transaction.
	Rejected OutcomeKind = 3
)

func (k OutcomeKind) String() string {
	switch k {
	case Delivered:
		return "delivered"
	case Failed:
		return "failed"
	case Rejected:
		return "rejected"
	}
	return "unknown"
}

// outcomeItem is one attempt's outcome.
type outcomeItem struct {
	ID          ID
	Token       uint64
	Attempt     uint32
	Kind        OutcomeKind
	NextAttempt int64 // for Failed: when the message is due again
	Duration    int64 // nanoseconds the handler ran
	Detail      string
}

// outcomeEvent records attempts' outcomes (TypeOutcome).
type outcomeEvent struct {
	Worker string
	Items  []outcomeItem
}

func (o *outcomeEvent) encode() []byte {
	size := 16 + len(o.Worker)
	for _, it := range o.Items {
		size += 49 + len(it.Detail)
	}
	e := newEncoder(size)
	e.str(o.Worker)
	e.count(len(o.Items))
	for _, it := range o.Items {
		e.id(it.ID)
		e.u64(it.Token)
		e.u32(it.Attempt)
		e.u8(uint8(it.Kind))
		e.i64(it.NextAttempt)
		e.i64(it.Duration)
		e.str(it.Detail)
	}
	return e.result()
}

func decodeOutcome(b []byte) (outcomeEvent, error) {
	d := newDecoder(b)
	var o outcomeEvent
	o.Worker = d.str(WorkerIDLengthMax)
	o.Items = make([]outcomeItem, d.count(OutcomeBatchMax, IDSize+33))
	for i := range o.Items {
		it := outcomeItem{ID: d.id(), Token: d.u64(), Attempt: d.u32(), Kind: OutcomeKind(d.u8()),
			NextAttempt: d.i64(), Duration: d.i64(), Detail: d.str(DetailLengthMax)}
		if d.err == nil && (it.Kind < Delivered || it.Kind > Rejected) {
			d.fail("outcome kind %d", it.Kind)
		}
		o.Items[i] = it
	}
	return o, d.end()
}

// DeadReason says why a message was dead-lettered.
type DeadReason uint8

const (
	// DeadRejected: the handler returned a permanent error.
	DeadRejected DeadReason = 1
	// DeadAttempts: the topic's maximum attempts were used up.
	DeadAttempts DeadReason = 2
	// DeadAge: the message outlived the topic's maximum age.
	DeadAge DeadReason = 3
	// DeadNoHandler: the worker has no handler for the topic. Not used by
	// Worker (which claims only its topics); kept for operators' tools.
	DeadNoHandler DeadReason = 4
)

func (r DeadReason) String() string {
	switch r {
	case DeadRejected:
		return "rejected"
	case DeadAttempts:
		return "max_attempts"
	case DeadAge:
		return "max_age"
	case DeadNoHandler:
		return "no_handler"
	}
	return "unknown"
}

type deadItem struct {
	ID     ID
	Reason DeadReason
	Detail string
}

// deadEvent dead-letters messages (TypeDead).
type deadEvent struct {
	Items []deadItem
}

func (de *deadEvent) encode() []byte {
	e := newEncoder(8 + 24*len(de.Items))
	e.count(len(de.Items))
	for _, it := range de.Items {
		e.id(it.ID)
		e.u8(uint8(it.Reason))
		e.str(it.Detail)
	}
	return e.result()
}

func decodeDead(b []byte) (deadEvent, error) {
	d := newDecoder(b)
	var de deadEvent
	de.Items = make([]deadItem, d.count(OutcomeBatchMax, IDSize+5))
	for i := range de.Items {
		it := deadItem{ID: d.id(), Reason: DeadReason(d.u8()), Detail: d.str(DetailLengthMax)}
		if d.err == nil && (it.Reason < DeadRejected || it.Reason > DeadNoHandler) {
			d.fail("dead reason %d", it.Reason)
		}
		de.Items[i] = it
	}
	return de, d.end()
}

// requeueEvent returns dead messages to pending (TypeRequeue).
type requeueEvent struct {
	Operator string
	Reason   string
	Items    []ID
}

func (r *requeueEvent) encode() []byte {
	e := newEncoder(16 + len(r.Operator) + len(r.Reason) + IDSize*len(r.Items))
	e.str(r.Operator)
	e.str(r.Reason)
	e.count(len(r.Items))
	for _, id := range r.Items {
		e.id(id)
	}
	return e.result()
}

func decodeRequeue(b []byte) (requeueEvent, error) {
	d := newDecoder(b)
	var r requeueEvent
	r.Operator = d.str(WorkerIDLengthMax)
	r.Reason = d.str(DetailLengthMax)
	r.Items = make([]ID, d.count(OutcomeBatchMax, IDSize))
	for i := range r.Items {
		r.Items[i] = d.id()
	}
	return r, d.end()
}

// Status is where a message stands.
type Status uint8

const (
	// Pending: waiting for its next attempt (or for the messages before it
	// with the same ordering key).
	Pending Status = 1
	// Leased: held by a worker until its lease's deadline.
	Leased Status = 2
	// Done: delivered.
	Done Status = 3
	// Dead: dead-lettered; an operator may requeue it.
	Dead Status = 4
)

func (s Status) String() string {
	switch s {
	case Pending:
		return "pending"
	case Leased:
		return "leased"
	case Done:
		return "done"
	case Dead:
		return "dead"
	}
	return "unknown"
}

// record is a message's derived state (state key m/<id>).
type record struct {
	Topic    string
	Seq      uint64 // the enqueue's seq on the messages chain
	Status   Status
	Attempts uint32
	Due      int64  // pending: next attempt; leased: lease deadline
	Token    uint64 // the current (or last) lease's seq on the deliveries chain
	// Group is, while leased, the seq of the deliveries entry (the lease
	// or its last heartbeat) that set Due: the message is counted on
	// the lease index's key (Due, Group).
	Group       uint64
	Worker      string // the current (or last) holder
	OrderingKey string
	EnqueuedAt  int64
	AgeFrom     int64 // EnqueuedAt, or the last requeue's time: MaxAge counts from it
}

func (r *record) encode() []byte { return r.appendEncoded(nil) }

// appendEncoded appends the record's encoding to prefix, in one allocation.
func (r *record) appendEncoded(prefix []byte) []byte {
	e := newEncoder(len(prefix) + 80 + len(r.Topic) + len(r.Worker) + len(r.OrderingKey))
	e.b = append(append(e.b[:0], prefix...), codecVersion)
	e.str(r.Topic)
	e.u64(r.Seq)
	e.u8(uint8(r.Status))
	e.u32(r.Attempts)
	e.i64(r.Due)
	e.u64(r.Token)
	e.u64(r.Group)
	e.str(r.Worker)
	e.str(r.OrderingKey)
	e.i64(r.EnqueuedAt)
	e.i64(r.AgeFrom)
	return e.result()
}

func decodeRecord(b []byte) (record, error) {
	d := newDecoder(b)
	r := record{Topic: d.str(TopicLengthMax), Seq: d.u64(), Status: Status(d.u8()), Attempts: d.u32(), Due: d.i64(),
		Token: d.u64(), Group: d.u64(), Worker: d.str(WorkerIDLengthMax), OrderingKey: d.str(OrderingKeyLengthMax),
		EnqueuedAt: d.i64(), AgeFrom: d.i64()}
	if d.err == nil && (r.Status < Pending || r.Status > Dead) {
		d.fail("status %d", r.Status)
	}
	return r, d.end()
}
