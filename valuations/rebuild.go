package valuations

import (
	"bytes"
	"context"
	"slices"

	"github.com/ledgerworks/ledger/chain"
)

// RebuildStats is what Rebuild did.
type RebuildStats struct {
	Transactions int64 // write transactions: one per item, per location and per page of keys with stray ones
	Entries      int64 // entries replayed
	Written      int64 // state keys written
	Deleted      int64 // state keys deleted: each location's previous state, and stray keys
	// Failures are the entries that break a rule of this package (an
	// undecodable payload, a recorded value change the arithmetic does not
	// give, a half-written operation): no state can make them right, so
	// Check still reports them.
	Failures []chain.Failure
}

// Rebuild recomputes the derived state of every tenant's items from the
// chains, as Check does, and writes it in place of the stored state: each
// item's current definition, each location's position, FIFO layers and
// reversal markers. Stored state that belongs to no chain is deleted.
// Afterwards Check reports only Failures.
//
// Each item definition and each location is rebuilt in its own write
// transaction, which locks as an operation does (the item's chain, then the
// location's quantity and value chains) before it reads the chains and
// replaces the state, so no operation of that location interleaves. A
// half-written operation (one half without the other) is a Failure here as
// in Check: complete it by retrying the operation, which also brings the
// position up to date, before rebuilding.
func Rebuild(ctx context.Context, db *chain.DB) (RebuildStats, error) {
	var stats RebuildStats
	c := &checker{ctx: ctx, db: db, rebuild: &stats}
	err := c.walk()
	stats.Failures = c.failures
	return stats, err
}

// unit runs fn in a read transaction for Check and in a write transaction
// for Rebuild. An Update function may run more than once, so each run
// starts from the failures and counts the first began with.
func (c *checker) unit(fn func(tx *chain.Tx) error) error {
	if c.rebuild == nil {
		return c.db.View(c.ctx, fn)
	}
	failures, stats := len(c.failures), *c.rebuild
	stats.Transactions++
	return c.db.Update(c.ctx, func(tx *chain.Tx) error {
		c.failures, *c.rebuild = c.failures[:failures], stats
		return fn(tx)
	})
}

// stray reports state that belongs to no chain; Rebuild deletes it instead.
func (c *checker) stray(name string, format string, args ...any) {
	if c.rebuild == nil {
		c.fail(name, 0, format, args...)
	}
}

func (c *checker) counted() {
	if c.rebuild != nil {
		c.rebuild.Entries++
	}
}

func (c *checker) put(tx *chain.Tx, key, value []byte) error {
	c.rebuild.Written++
	return tx.StatePut(key, value)
}

// deleteStraysNow deletes the stray keys a page of orphanState found (in a
// read transaction), each after making sure in this write transaction that
// it still belongs to no chain: an operation may have created its location
// or item since.
func (c *checker) deleteStraysNow(tx *chain.Tx, keys [][]byte) error {
	heads := map[string]bool{}
	for _, key := range keys {
		_, stray, err := strayKey(tx, key, heads)
		if err != nil {
			return err
		}
		if stray {
			if err := c.deleteStrays(tx, [][]byte{key}); err != nil {
				return err
			}
		}
	}
	return nil
}

func (c *checker) deleteStrays(tx *chain.Tx, keys [][]byte) error {
	for _, key := range keys {
		if err := tx.StateDelete(key); err != nil {
			return err
		}
		c.rebuild.Deleted++
	}
	return nil
}

// deleteRange deletes every state key in [start, end).
func (c *checker) deleteRange(tx *chain.Tx, start, end []byte) error {
	deleted, err := tx.StateDeleteRange(start, end)
	c.rebuild.Deleted += deleted
	return err
}

// writeLocation replaces a location's position, layers and markers with
// the rebuilt ones, which compare would compare them with.
func (c *checker) writeLocation(tx *chain.Tx, tenant, item string, r *rebuilt) error {
	position := positionKey(tenant, item, r.location)
	layers := layerPrefix(tenant, item, r.location)
	markers := reversalKey(tenant, item, r.location, "")
	for _, prefix := range [][]byte{layers, markers} {
		if err := c.deleteRange(tx, prefix, prefixEnd(prefix)); err != nil {
			return err
		}
	}
	if err := c.deleteRange(tx, position, append(bytes.Clone(position), 0)); err != nil {
		return err
	}
	want := r.position()
	if err := c.put(tx, position, encodePosition(&want)); err != nil {
		return err
	}
	for _, l := range r.layers.open {
		if err := c.put(tx, layerKey(layers, l.ID), encodeLayer(l)); err != nil {
			return err
		}
	}
	for _, reversed := range sortedKeys(r.markers) {
		if err := c.put(tx, reversalKey(tenant, item, r.location, reversed), []byte(r.markers[reversed])); err != nil {
			return err
		}
	}
	return nil
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
