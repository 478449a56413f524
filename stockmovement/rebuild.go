package stockmovement

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/ledgerworks/ledger/chain"
	"github.com/ledgerworks/ledger/decimal"
)

// RebuildStats is what Rebuild did.
type RebuildStats struct {
	Transactions int64 // write transactions: one per catalog, per item and per page of keys with stray ones
	Entries      int64 // entries replayed
	Written      int64 // state keys written
	Deleted      int64 // state keys deleted: each rebuilt unit's previous state, and stray keys
	// Failures are the entries that break a rule of this package (an
	// undecodable payload, a recorded balance its movements do not give):
	// no state can make them right, so Check still reports them.
	Failures []chain.Failure
}

// Rebuild recomputes the derived state of every tenant from the chains, as
// Check does, and writes it in place of the stored state: item and location
// definitions, each location's balance, each item's total and the reversal
// markers. State of items without chains, of tenants without a catalog and
// keys this package does not write are deleted. Afterwards Check reports
// only Failures.
//
// Every catalog and every item (all its location chains, whose total is
// shared) is rebuilt in its own write transaction, which reads the chains
// and replaces the state together; catalogs first, since an item's balances
// are read at the scale of its definition. A rebuild therefore never holds
// more than one item in a transaction and can run while others write: on
// PostgreSQL the item's transaction locks its lock chain (ItemLockChain)
// first, as every movement does, so no movement of that item interleaves.
func Rebuild(ctx context.Context, db *chain.DB) (RebuildStats, error) {
	var stats RebuildStats
	c := &checker{ctx: ctx, db: db, visited: map[string]bool{}, rebuild: &stats}
	err := c.walk(true, false)
	if err == nil {
		err = c.walk(false, true)
	}
	if err == nil {
		err = c.checkOrphans()
	}
	stats.Failures = c.sortedFailures()
	return stats, err
}

// unit runs fn in a read transaction for Check and in a write transaction
// for Rebuild. An Update function may run more than once, so each run
// starts from the failures and counts the previous run began with.
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

// stray reports state the chains do not imply; Rebuild deletes it instead.
func (c *checker) stray(chainName string, seq uint64, format string, args ...any) {
	if c.rebuild == nil {
		c.fail(chainName, seq, format, args...)
	}
}

// lock holds a chain's head until a rebuild's transaction ends, as a writer
// of that chain does first (on PostgreSQL; bbolt has one writer anyway).
func (c *checker) lock(tx *chain.Tx, name string) error {
	if c.rebuild == nil {
		return nil
	}
	if _, err := tx.Head(name); err != nil && !errors.Is(err, chain.ErrNotFound) {
		return err
	}
	return nil
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

// deleteRange deletes every state key in [start, end).
func (c *checker) deleteRange(tx *chain.Tx, start, end []byte) error {
	deleted, err := tx.StateDeleteRange(start, end)
	c.rebuild.Deleted += deleted
	return err
}

func (c *checker) deleteKeys(tx *chain.Tx, keys [][]byte) error {
	for _, key := range keys {
		if err := tx.StateDelete(key); err != nil {
			return err
		}
		c.rebuild.Deleted++
	}
	return nil
}

// writeDefinitions replaces a tenant's item or location definitions.
func (c *checker) writeDefinitions(tx *chain.Tx, start, end []byte, rebuilt map[string]definition) error {
	if err := c.deleteRange(tx, start, end); err != nil {
		return err
	}
	ids := make([]string, 0, len(rebuilt))
	for id := range rebuilt {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for _, id := range ids {
		d := rebuilt[id]
		key := append(append([]byte(nil), start...), id...)
		if err := c.put(tx, key, append(binary.BigEndian.AppendUint64(nil, d.seq), d.value...)); err != nil {
			return err
		}
	}
	return nil
}

// clearItem locks an item as a movement does and deletes its balances,
// total and reversal markers, which the replay of its chains writes again.
func (c *checker) clearItem(tx *chain.Tx, tenant, item string) error {
	if err := lockHeads(tx, tenant, item); err != nil {
		return err
	}
	total := stateKey(tenant, stateTotal, item)
	if err := c.deleteRange(tx, total, append(append([]byte(nil), total...), 0)); err != nil {
		return err
	}
	for _, kind := range []string{stateBalance, stateReversed} {
		start, end := statePrefix(tenant, kind, item)
		if err := c.deleteRange(tx, start, end); err != nil {
			return err
		}
	}
	return nil
}

// writeTotal writes the sum of an item's balances.
func (c *checker) writeTotal(tx *chain.Tx, tenant string, item DefinedItem, prefix string, total decimal.Decimal, ok bool) error {
	if !ok {
		c.fail(strings.TrimSuffix(prefix, "/"), 0, "balances of item %q overflow when summed", item.ID)
		return nil
	}
	return c.put(tx, stateKey(tenant, stateTotal, item.ID), binary.BigEndian.AppendUint64(nil, uint64(total.Units())))
}

// deleteOrphans deletes the stray keys a page of checkOrphans found (in a
// read transaction), each after making sure in this write transaction that
// it is still stray: a writer may have created the item's first chain, or
// the tenant's catalog, since the passes visited the chains.
func (c *checker) deleteOrphans(tx *chain.Tx, keys [][]byte) error {
	for _, key := range keys {
		stray, err := strayNow(tx, key)
		if err != nil {
			return err
		}
		if stray {
			if err := c.deleteKeys(tx, [][]byte{key}); err != nil {
				return err
			}
		}
	}
	return nil
}

func strayNow(tx *chain.Tx, key []byte) (bool, error) {
	tenant, kind, parts, ok := parseStateKey(key)
	if !ok || validateID(tenant) != nil {
		return true, nil
	}
	switch kind {
	case stateBalance, stateTotal, stateReversed:
		if len(parts) == 0 || validateID(parts[0]) != nil {
			return true, nil
		}
		if err := lockHeads(tx, tenant, parts[0]); err != nil {
			return false, err
		}
		prefix := fmt.Sprintf("%s/%s/%s/", tenant, Domain, parts[0])
		for h, err := range tx.Chains(prefix) {
			if err != nil {
				return false, err
			}
			return !strings.HasPrefix(h.Chain, prefix), nil
		}
		return true, nil
	case stateItem, stateLocation:
		catalog, _ := CatalogChain(tenant)
		_, err := tx.Head(catalog)
		if errors.Is(err, chain.ErrNotFound) {
			return true, nil
		}
		return false, err
	}
	return true, nil
}
