package outbox

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/ledgerworks/ledger/chain"
)

// Check rebuilds every tenant's delivery state from its outbox chains, in
// memory, and compares it with the stored state: every difference (and
// every entry that does not fit the state before it) is a failure with
// chain.ReasonStateMismatch. Each tenant is read in one snapshot.
func Check(ctx context.Context, db *chain.DB) ([]chain.Failure, error) {
	return walk(ctx, db, nil)
}

// RebuildStats is what Rebuild did.
type RebuildStats struct {
	Tenants int64 // one write transaction each
	Entries int64 // entries replayed
	Written int64 // state keys written
	Deleted int64 // state keys deleted (the previous state, and stray keys)
	// Failures are entries that do not fit the state before them; the
	// state is rebuilt without them and Check keeps reporting them.
	Failures []chain.Failure
}

// Rebuild recomputes every tenant's delivery state from the chains, as
// Check does, and writes it in place of the stored state, one tenant per
// write transaction (which locks the tenant's deliveries chains first, so
// no worker interleaves on a shared store). State of tenants without
// outbox chains is deleted.
func Rebuild(ctx context.Context, db *chain.DB) (RebuildStats, error) {
	var stats RebuildStats
	failures, err := walk(ctx, db, &stats)
	stats.Failures = failures
	return stats, err
}

// walk checks (stats nil) or rebuilds every tenant.
func walk(ctx context.Context, db *chain.DB, stats *RebuildStats) ([]chain.Failure, error) {
	tenants, err := outboxTenants(ctx, db)
	if err != nil {
		return nil, err
	}
	var failures []chain.Failure
	for _, t := range tenants {
		var f []chain.Failure
		var s RebuildStats
		unit := func(tx *chain.Tx) error {
			f, s = nil, RebuildStats{}
			var err error
			f, err = checkTenant(tx, t.name, t.topics, stats != nil, &s)
			return err
		}
		if stats == nil {
			err = db.View(ctx, unit)
		} else {
			err = db.Update(ctx, unit)
			stats.Tenants++
			stats.Entries += s.Entries
			stats.Written += s.Written
			stats.Deleted += s.Deleted
		}
		if err != nil {
			return failures, fmt.Errorf("outbox: tenant %q: %w", t.name, err)
		}
		failures = append(failures, f...)
	}
	f, err := strayState(ctx, db, tenants, stats)
	return append(failures, f...), err
}

type tenantTopics struct {
	name   string
	topics []string
}

// outboxTenants lists the tenants with outbox chains and their topics, in
// name order.
func outboxTenants(ctx context.Context, db *chain.DB) ([]tenantTopics, error) {
	var out []tenantTopics
	for h, err := range db.Chains(ctx, "") {
		if err != nil {
			return nil, err
		}
		tenant, topic, deliveries, ok := ParseChain(h.Chain)
		if !ok || deliveries {
			continue
		}
		if len(out) == 0 || out[len(out)-1].name != tenant {
			out = append(out, tenantTopics{name: tenant})
		}
		last := &out[len(out)-1]
		last.topics = append(last.topics, topic)
	}
	// A deliveries chain without its messages chain has nothing to
	// deliver; its entries fail as unknown messages only if replayed, so
	// look for such topics too.
	for h, err := range db.Chains(ctx, "") {
		if err != nil {
			return nil, err
		}
		tenant, topic, deliveries, ok := ParseChain(h.Chain)
		if !ok || !deliveries {
			continue
		}
		i, found := slices.BinarySearchFunc(out, tenant, func(t tenantTopics, name string) int { return strings.Compare(t.name, name) })
		if !found {
			out = slices.Insert(out, i, tenantTopics{name: tenant})
		}
		if !slices.Contains(out[i].topics, topic) {
			out[i].topics = append(out[i].topics, topic)
			slices.Sort(out[i].topics)
		}
	}
	return out, nil
}

// checkTenant replays a tenant's topics into memory and compares (or, with
// rebuild, replaces) the stored state.
func checkTenant(tx *chain.Tx, tenant string, topics []string, rebuild bool, stats *RebuildStats) ([]chain.Failure, error) {
	if rebuild {
		for _, topic := range topics {
			deliveries, _ := DeliveriesChain(tenant, topic)
			if _, err := tx.Head(deliveries); err != nil && !isNotFound(err) {
				return nil, err
			}
		}
	}
	mem := newMemState()
	var failures []chain.Failure
	fail := func(e *chain.Entry, err error) {
		failures = append(failures, chain.Failure{Chain: e.Chain, Seq: e.Seq, Reason: chain.ReasonStateMismatch,
			Detail: fmt.Sprintf("outbox entry %s does not fit: %v", e.Type, err)})
	}
	for _, topic := range topics {
		messages, _ := MessagesChain(tenant, topic)
		for e, err := range tx.Entries(messages, 1) {
			if err != nil {
				return nil, err
			}
			stats.Entries++
			if e.Type != TypeMessage {
				fail(&e, fmt.Errorf("not a message"))
				continue
			}
			m, err := decodeMessage(e.Payload)
			if err == nil {
				err = applyMessage(mem, tenant, topic, &e, &m, false)
			}
			if err != nil {
				fail(&e, err)
			}
		}
	}
	for _, topic := range topics {
		deliveries, _ := DeliveriesChain(tenant, topic)
		for e, err := range tx.Entries(deliveries, 1) {
			if err != nil {
				return nil, err
			}
			stats.Entries++
			if err := applyDelivery(mem, tenant, topic, &e); err != nil {
				fail(&e, err)
			}
		}
	}
	settleFloors(mem, tenant, topics)
	prefix := tenantPrefix(tenant)
	stored := map[string][]byte{}
	for kv, err := range tx.StateScan(prefix, prefixEnd(prefix), false) {
		if err != nil {
			return nil, err
		}
		stored[string(kv.Key)] = bytes.Clone(kv.Value)
	}
	if rebuild {
		for k := range stored {
			if err := tx.StateDelete([]byte(k)); err != nil {
				return nil, err
			}
			stats.Deleted++
		}
		for _, k := range slices.Sorted(mapKeys(mem.kv)) {
			if err := tx.StatePut([]byte(k), mem.kv[k]); err != nil {
				return nil, err
			}
			stats.Written++
		}
		return failures, nil
	}
	where := tenant + "/" + Domain
	for _, k := range slices.Sorted(mapKeys(mem.kv)) {
		v, ok := stored[k]
		switch {
		case !ok:
			failures = append(failures, stateFailure(where, k, "missing"))
		case !bytes.Equal(v, mem.kv[k]) && !previousReadyValue(k, v, mem.kv[k]):
			failures = append(failures, stateFailure(where, k, "differs from the chains"))
		}
	}
	for _, k := range slices.Sorted(mapKeys(stored)) {
		if _, ok := mem.kv[k]; !ok {
			failures = append(failures, stateFailure(where, k, "is not derived from any entry"))
		}
	}
	return failures, nil
}

// previousReadyValue reports whether stored is the value an outbox wrote
// before ready keys carried their message's record (the id alone) for the
// ready key whose value is now want. It is as good: a claim reads the
// record by its key instead, and rebuild-state rewrites it in full.
func previousReadyValue(key string, stored, want []byte) bool {
	parts := strings.SplitN(key, "/", 4)
	return len(parts) == 4 && parts[0] == Domain && parts[2] == stateReady &&
		len(stored) == IDSize && len(want) > IDSize && bytes.Equal(stored, want[:IDSize])
}

// settleFloors sets each topic's floor in the rebuilt state to its first
// ready key's due time (floorEmpty without one), as the operations leave it
// after every commit; a topic without enqueues has no floor.
func settleFloors(mem *memState, tenant string, topics []string) {
	for _, topic := range topics {
		key := string(floorKey(tenant, topic))
		if _, ok := mem.kv[key]; !ok {
			continue
		}
		prefix := string(topicPrefix(tenant, stateReady, topic))
		first := int64(floorEmpty)
		for k := range mem.kv {
			if strings.HasPrefix(k, prefix) && len(k) == len(prefix)+16 {
				if due, _ := decodeFloor([]byte(k[len(prefix) : len(prefix)+8])); due < first {
					first = due
				}
			}
		}
		mem.kv[key] = encodeFloor(first)
	}
}

func mapKeys[V any](m map[string]V) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

func stateFailure(where, key, what string) chain.Failure {
	return chain.Failure{Chain: where, Reason: chain.ReasonStateMismatch,
		Detail: fmt.Sprintf("outbox state key %q %s", describeKey(key), what)}
}

// describeKey prints a state key with its binary parts in hex.
func describeKey(key string) string {
	var b strings.Builder
	for i := 0; i < len(key); i++ {
		c := key[i]
		if c >= 0x20 && c < 0x7f {
			b.WriteByte(c)
		} else {
			fmt.Fprintf(&b, "\\x%02x", c)
		}
	}
	return b.String()
}

// strayState reports (or, rebuilding, deletes) outbox state of tenants
// without outbox chains.
func strayState(ctx context.Context, db *chain.DB, tenants []tenantTopics, stats *RebuildStats) ([]chain.Failure, error) {
	known := map[string]bool{}
	for _, t := range tenants {
		known[t.name] = true
	}
	var failures []chain.Failure
	var stray [][]byte
	start := []byte(Domain + "/")
	err := db.View(ctx, func(tx *chain.Tx) error {
		for kv, err := range tx.StateScan(start, prefixEnd(start), false) {
			if err != nil {
				return err
			}
			rest := kv.Key[len(start):]
			tenant, _, _ := bytes.Cut(rest, []byte("/"))
			if known[string(tenant)] {
				continue
			}
			stray = append(stray, bytes.Clone(kv.Key))
			failures = append(failures, stateFailure(string(tenant)+"/"+Domain, string(kv.Key), "belongs to a tenant without outbox chains"))
		}
		return nil
	})
	if err != nil || stats == nil || len(stray) == 0 {
		return failures, err
	}
	err = db.Update(ctx, func(tx *chain.Tx) error {
		for _, k := range stray {
			if err := tx.StateDelete(k); err != nil {
				return err
			}
		}
		return nil
	})
	stats.Deleted += int64(len(stray))
	return nil, err
}
