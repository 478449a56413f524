package outbox

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/ledgerworks/ledger/chain"
)

// The transitions: each applies one decoded entry of a topic's chains to
// the derived state. The operations (enqueue, claim, record, heartbeat,
// requeue) decide what to record, append the entry and apply it through
// these functions; Check and Rebuild replay the chains through them. An
// entry that does not fit the state (an outcome for a lease that is not
// current, say) is an error here: the operations never record one, so on
// a check it means the chains and the state disagree.

// transitionError is an entry that does not fit the state it is applied to.
type transitionError struct {
	id     ID
	reason string
}

func (e *transitionError) Error() string { return fmt.Sprintf("message %s: %s", e.id, e.reason) }

func badTransition(id ID, format string, args ...any) error {
	return &transitionError{id: id, reason: fmt.Sprintf(format, args...)}
}

func enqueueDue(e *chain.Entry, m *messageEvent) int64 { return max(e.TimeUnixNano, m.NotBefore) }

// applyMessage applies an enqueue. fresh is set by EnqueueTx, whose
// append just created the entry (the engine's UNIQUE(chain, key) makes
// the message new); a replay of the chains checks that it is.
func applyMessage(s stateStore, tenant, topic string, e *chain.Entry, m *messageEvent, fresh bool) error {
	id := MessageID(tenant, topic, e.IdempotencyKey)
	if !fresh {
		if _, err := getRecord(s, tenant, id); err == nil {
			return badTransition(id, "enqueued twice")
		} else if !IsUnknown(err) {
			return err
		}
	}
	r := record{Topic: topic, Seq: e.Seq, Status: Pending, Due: enqueueDue(e, m), OrderingKey: m.OrderingKey,
		EnqueuedAt: e.TimeUnixNano, AgeFrom: e.TimeUnixNano}
	if err := putRecord(s, tenant, id, &r); err != nil {
		return err
	}
	if m.OrderingKey != "" {
		_, _, busy, err := s.queueHead(keyQueuePrefix(tenant, topic, m.OrderingKey))
		if err != nil {
			return err
		}
		if err := s.put(keyQueueKey(tenant, topic, m.OrderingKey, e.Seq), id[:]); err != nil {
			return err
		}
		if busy {
			return nil // it waits for the messages before it
		}
	}
	return putReady(s, tenant, id, &r)
}

// putReady puts a message's ready key, lowering the topic's floor below it
// first. Its value is the message id and a copy of the record r, which the
// caller puts as the message's record in the same transition: a claim
// reads the records of the messages it leases with the index, in one
// range, instead of one point read each.
func putReady(s stateStore, tenant string, id ID, r *record) error {
	if err := lowerFloor(s, tenant, r.Topic, r.Due); err != nil {
		return err
	}
	return s.put(readyKey(tenant, r.Topic, r.Due, r.Seq), r.appendEncoded(id[:]))
}

// splitReadyValue splits a ready key's value into the message id and the
// record it carries. A value of the id alone (as an outbox written before
// ready keys carried records holds) has no record: rec is nil, and the
// record is read by its key.
func splitReadyValue(v []byte) (id ID, rec []byte, ok bool) {
	if len(v) < IDSize {
		return id, nil, false
	}
	copy(id[:], v)
	if len(v) > IDSize {
		rec = v[IDSize:]
	}
	return id, rec, true
}

// The floor of a topic's ready index (state key f/<topic>) is the due time
// of its first ready key, or floorEmpty when it has none. Claims read the
// index from it instead of from its start, past the keys earlier claims
// deleted (which an LSM store such as storage/bolt keeps as tombstones
// until it checkpoints, and a scan from the start would step over every
// time). A transition that puts a ready key lowers the floor first, in the
// same transaction; an operation that deletes or moves ready keys (claim,
// record, heartbeat) settles it on the first key left at its end. So the
// floor is derived state like the rest, exactly what the ready index
// gives after every commit. On a shared store the floor's row is locked
// by every writable transaction that reads it, so a settle and a commit
// that lowers it never interleave.
// floorEmpty is the floor of an empty ready index.
const floorEmpty = math.MaxInt64

func floorKey(tenant, topic string) []byte { return topicPrefix(tenant, stateFloor, topic) }

func encodeFloor(due int64) []byte {
	return binary.BigEndian.AppendUint64(nil, uint64(due)^(1<<63))
}

func decodeFloor(v []byte) (int64, bool) {
	if len(v) != 8 {
		return 0, false
	}
	return int64(binary.BigEndian.Uint64(v) ^ (1 << 63)), true
}

// readFloor returns the topic's floor; found is false when it has none
// (or an undecodable one): scans then start at the index's beginning.
func readFloor(s stateStore, tenant, topic string) (int64, bool, error) {
	v, found, err := s.get(floorKey(tenant, topic))
	if err != nil || !found {
		return 0, false, err
	}
	floor, ok := decodeFloor(v)
	return floor, ok, nil
}

func lowerFloor(s stateStore, tenant, topic string, due int64) error {
	floor, found, err := readFloor(s, tenant, topic)
	if err != nil || found && floor <= due {
		return err
	}
	return s.put(floorKey(tenant, topic), encodeFloor(due))
}

func applyLease(s stateStore, tenant, topic string, e *chain.Entry, l *leaseEvent) error {
	counts := leaseCounts{}
	for _, it := range l.Items {
		r, err := recordOf(s, tenant, topic, it.ID)
		if err != nil {
			return err
		}
		if r.Status != Pending && r.Status != Leased {
			return badTransition(it.ID, "leased while %s", r.Status)
		}
		if it.Attempt != r.Attempts+1 {
			return badTransition(it.ID, "lease of attempt %d after %d attempts", it.Attempt, r.Attempts)
		}
		if err := leaveIndex(s, tenant, &r, counts); err != nil {
			return err
		}
		r.Status, r.Attempts, r.Token, r.Worker, r.Due, r.Group = Leased, it.Attempt, e.Seq, l.Worker, l.Deadline, e.Seq
		counts.add(&r, 1)
		if err := putRecord(s, tenant, it.ID, &r); err != nil {
			return err
		}
	}
	return counts.write(s, tenant, topic)
}

// leaseCounts are the changes one entry makes to the counts of the lease
// index's keys of its topic, written once at its end (a batch of a
// thousand outcomes of one lease writes its key once, and builds it once).
type leaseCounts map[leaseRef]int64

// leaseRef names a lease index key: the deadline and the seq of the entry
// that set it.
type leaseRef struct {
	deadline int64
	seq      uint64
}

// add counts n more (or fewer) messages on the key of the lease the
// record holds.
func (c leaseCounts) add(r *record, n int64) { c[leaseRef{r.Due, r.Group}] += n }

func (c leaseCounts) write(s stateStore, tenant, topic string) error {
	for ref, n := range c {
		if n == 0 {
			continue
		}
		key := leaseKey(tenant, topic, ref.deadline, ref.seq)
		v, found, err := s.get(key)
		if err != nil {
			return err
		}
		count := int64(0)
		if found {
			if len(v) != 8 {
				return fmt.Errorf("outbox: lease index key %x holds %d bytes", key, len(v))
			}
			count = int64(binary.BigEndian.Uint64(v))
		}
		switch count += n; {
		case count < 0:
			return fmt.Errorf("outbox: lease index key %x would count %d messages", key, count)
		case count == 0:
			err = s.del(key)
		default:
			err = s.put(key, binary.BigEndian.AppendUint64(nil, uint64(count)))
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// leaveIndex takes a pending or leased message out of the index it is
// in: a pending one's ready key is deleted, a leased one is no longer
// counted on its lease's key.
func leaveIndex(s stateStore, tenant string, r *record, counts leaseCounts) error {
	switch r.Status {
	case Pending:
		return s.del(readyKey(tenant, r.Topic, r.Due, r.Seq))
	case Leased:
		counts.add(r, -1)
	}
	return nil
}

// recordOf reads the record of a message of the topic.
func recordOf(s stateStore, tenant, topic string, id ID) (record, error) {
	r, err := getRecord(s, tenant, id)
	if err != nil {
		if IsUnknown(err) {
			return r, badTransition(id, "no such message")
		}
		return r, err
	}
	if r.Topic != topic {
		return r, badTransition(id, "belongs to topic %q", r.Topic)
	}
	return r, nil
}

// currentLease checks that token is the message's current lease.
func currentLease(r *record, id ID, token uint64) error {
	if r.Status != Leased || r.Token != token {
		return badTransition(id, "lease %d is not current (%s, lease %d)", token, r.Status, r.Token)
	}
	return nil
}

func applyHeartbeat(s stateStore, tenant, topic string, e *chain.Entry, h *heartbeatEvent) error {
	counts := leaseCounts{}
	for _, it := range h.Items {
		r, err := recordOf(s, tenant, topic, it.ID)
		if err != nil {
			return err
		}
		if err := currentLease(&r, it.ID, it.Token); err != nil {
			return err
		}
		counts.add(&r, -1)
		r.Due, r.Group = h.Deadline, e.Seq
		counts.add(&r, 1)
		if err := putRecord(s, tenant, it.ID, &r); err != nil {
			return err
		}
	}
	return counts.write(s, tenant, topic)
}

func applyOutcome(s stateStore, tenant, topic string, o *outcomeEvent) error {
	counts := leaseCounts{}
	for _, it := range o.Items {
		r, err := recordOf(s, tenant, topic, it.ID)
		if err != nil {
			return err
		}
		if err := currentLease(&r, it.ID, it.Token); err != nil {
			return err
		}
		if it.Attempt != r.Attempts {
			return badTransition(it.ID, "outcome of attempt %d during attempt %d", it.Attempt, r.Attempts)
		}
		counts.add(&r, -1)
		r.Group = 0
		if it.Kind == Delivered {
			r.Status = Done
			if err := putRecord(s, tenant, it.ID, &r); err != nil {
				return err
			}
			if err := finishInQueue(s, tenant, &r); err != nil {
				return err
			}
			continue
		}
		r.Status, r.Due = Pending, it.NextAttempt
		if err := putReady(s, tenant, it.ID, &r); err != nil {
			return err
		}
		if err := putRecord(s, tenant, it.ID, &r); err != nil {
			return err
		}
	}
	return counts.write(s, tenant, topic)
}

// finishInQueue removes a delivered message from its ordering key's queue
// and makes the next one ready.
func finishInQueue(s stateStore, tenant string, r *record) error {
	if r.OrderingKey == "" {
		return nil
	}
	if err := s.del(keyQueueKey(tenant, r.Topic, r.OrderingKey, r.Seq)); err != nil {
		return err
	}
	v, _, found, err := s.queueHead(keyQueuePrefix(tenant, r.Topic, r.OrderingKey))
	if err != nil || !found {
		return err
	}
	var next ID
	if len(v) != IDSize {
		return fmt.Errorf("outbox: ordering queue of %q holds a value of %d bytes", r.OrderingKey, len(v))
	}
	copy(next[:], v)
	nr, err := recordOf(s, tenant, r.Topic, next)
	if err != nil {
		return err
	}
	return putReady(s, tenant, next, &nr)
}

func applyDead(s stateStore, tenant, topic string, d *deadEvent) error {
	counts := leaseCounts{}
	for _, it := range d.Items {
		r, err := recordOf(s, tenant, topic, it.ID)
		if err != nil {
			return err
		}
		if r.Status != Pending && r.Status != Leased {
			return badTransition(it.ID, "dead-lettered while %s", r.Status)
		}
		if err := leaveIndex(s, tenant, &r, counts); err != nil {
			return err
		}
		r.Status, r.Group = Dead, 0
		if err := putRecord(s, tenant, it.ID, &r); err != nil {
			return err
		}
		if err := s.put(deadKey(tenant, topic, r.Seq), it.ID[:]); err != nil {
			return err
		}
	}
	return counts.write(s, tenant, topic)
}

func applyRequeue(s stateStore, tenant, topic string, e *chain.Entry, q *requeueEvent) error {
	for _, id := range q.Items {
		r, err := recordOf(s, tenant, topic, id)
		if err != nil {
			return err
		}
		if r.Status != Dead {
			return badTransition(id, "requeued while %s", r.Status)
		}
		if err := s.del(deadKey(tenant, topic, r.Seq)); err != nil {
			return err
		}
		r.Status, r.Attempts, r.AgeFrom, r.Due = Pending, 0, e.TimeUnixNano, e.TimeUnixNano
		if err := putReady(s, tenant, id, &r); err != nil {
			return err
		}
		if err := putRecord(s, tenant, id, &r); err != nil {
			return err
		}
	}
	return nil
}

// applyDelivery applies one entry of a deliveries chain.
func applyDelivery(s stateStore, tenant, topic string, e *chain.Entry) error {
	switch e.Type {
	case TypeLease:
		l, err := decodeLease(e.Payload)
		if err != nil {
			return err
		}
		return applyLease(s, tenant, topic, e, &l)
	case TypeHeartbeat:
		h, err := decodeHeartbeat(e.Payload)
		if err != nil {
			return err
		}
		return applyHeartbeat(s, tenant, topic, e, &h)
	case TypeOutcome:
		o, err := decodeOutcome(e.Payload)
		if err != nil {
			return err
		}
		return applyOutcome(s, tenant, topic, &o)
	case TypeDead:
		d, err := decodeDead(e.Payload)
		if err != nil {
			return err
		}
		return applyDead(s, tenant, topic, &d)
	case TypeRequeue:
		q, err := decodeRequeue(e.Payload)
		if err != nil {
			return err
		}
		return applyRequeue(s, tenant, topic, e, &q)
	}
	return fmt.Errorf("%w: type %q on a deliveries chain", errDecode, e.Type)
}
