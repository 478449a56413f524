package outbox

import (
	"context"
	"fmt"

	"github.com/ledgerworks/ledger/chain"
)

// RequeueOptions are an operator's requeue. Operator is required: it is
// recorded, with the reason, on the deliveries chain.
type RequeueOptions struct {
	Operator string
	Reason   string
}

// RequeueTx returns dead messages to pending, due at once with a fresh
// budget of attempts and age, in one requeue entry per topic. A message
// that is not dead is refused with ErrNotDead and nothing is written.
func RequeueTx(tx *chain.Tx, tenant string, ids []ID, o RequeueOptions) error {
	if err := validText("operator", o.Operator, 1, WorkerIDLengthMax, ErrInvalidOptions); err != nil {
		return err
	}
	if err := validText("reason", o.Reason, 0, DetailLengthMax, ErrInvalidOptions); err != nil {
		return err
	}
	if len(ids) == 0 || len(ids) > OutcomeBatchMax {
		return invalid("ids", ErrInvalidOptions, "%d messages, want 1..%d", len(ids), OutcomeBatchMax)
	}
	if _, err := chain.ScopedName(tenant, Domain); err != nil {
		return invalid("tenant", ErrInvalidName, "tenant %q: %v", tenant, err)
	}
	st := newTxState(tx)
	byTopic := map[string][]ID{}
	var topics []string
	seen := map[ID]bool{}
	for _, id := range ids {
		if seen[id] {
			continue
		}
		seen[id] = true
		r, err := getRecord(st, tenant, id)
		if err != nil {
			return err
		}
		if r.Status != Dead {
			return invalid("id", ErrNotDead, "message %s is %s", id, r.Status)
		}
		if byTopic[r.Topic] == nil {
			topics = append(topics, r.Topic)
		}
		byTopic[r.Topic] = append(byTopic[r.Topic], id)
	}
	for _, topic := range topics {
		deliveries, _ := DeliveriesChain(tenant, topic)
		ev := requeueEvent{Operator: o.Operator, Reason: o.Reason, Items: byTopic[topic]}
		res, err := tx.Append(chain.Request{Chain: deliveries, Type: TypeRequeue, Payload: ev.encode()})
		if err != nil {
			return err
		}
		if err := applyRequeue(st, tenant, topic, &res.Entry, &ev); err != nil {
			return fmt.Errorf("outbox: requeue: %w", err)
		}
		notify(tx, tenant, topic)
	}
	return nil
}

// Requeue is RequeueTx in its own transaction.
func Requeue(ctx context.Context, db *chain.DB, tenant string, ids []ID, o RequeueOptions) error {
	return db.Update(ctx, func(tx *chain.Tx) error { return RequeueTx(tx, tenant, ids, o) })
}
