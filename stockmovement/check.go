package stockmovement

import (
	"bytes"
	"cmp"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/ledgerworks/ledger/chain"
	"github.com/ledgerworks/ledger/decimal"
)

// Check rebuilds the derived state of every tenant from the chains and
// compares it with the stored state: item and location definitions, the
// running quantity stored on every entry, each location's balance, each
// item's total and the reversal markers. Every difference is one
// chain.Failure with reason chain.ReasonStateMismatch, in chain order, up to
// chain.FailuresMaxDefault. The error is for operating failures only.
//
// Check streams: each item's chains are read in one read transaction (so
// the item's total is compared on one snapshot), each entry once, and the
// memory it holds is bounded by the number of items and locations, not
// entries. Chains of other domains are skipped without being read.
func Check(ctx context.Context, db *chain.DB) ([]chain.Failure, error) {
	c := &checker{ctx: ctx, db: db, visited: map[string]bool{}}
	err := c.walk(true, true)
	if err == nil {
		err = c.checkOrphans()
	}
	return c.sortedFailures(), err
}

// walk visits every chain of this package in name order, one item (all its
// location chains) or one catalog at a time.
func (c *checker) walk(catalogs, items bool) error {
	cursor := ""
	for {
		name, found, err := c.firstChain(cursor)
		if err != nil || !found {
			return err
		}
		parts := chain.SplitScopedName(name)
		tenant := parts[0]
		stockPrefix := tenant + "/" + Domain + "/"
		switch {
		case len(parts) == 3 && parts[1] == Domain && parts[2] == catalogPart && validateID(tenant) == nil:
			if catalogs {
				err = c.checkCatalog(tenant, name)
			}
			cursor = name + "\x00"
		case len(parts) == 4 && parts[1] == Domain && validateIDs(tenant, parts[2]) == nil:
			prefix := stockPrefix + parts[2] + "/"
			if items {
				err = c.checkItem(tenant, parts[2], prefix)
			}
			cursor = string(prefixEnd([]byte(prefix)))
		case strings.HasPrefix(name, stockPrefix):
			cursor = name + "\x00" // not a name this package writes
		case name < stockPrefix:
			cursor = stockPrefix
		default:
			cursor = string(prefixEnd([]byte(tenant + "/")))
		}
		if err != nil {
			return err
		}
	}
}

func (c *checker) sortedFailures() []chain.Failure {
	slices.SortStableFunc(c.failures, func(a, b chain.Failure) int {
		return cmp.Or(strings.Compare(a.Chain, b.Chain), cmp.Compare(a.Seq, b.Seq))
	})
	return c.failures
}

// checker collects failures and remembers which items had chains. With
// rebuild set it is Rebuild: every unit runs in a write transaction and the
// state the chains imply is written instead of compared (rebuild.go); the
// failures it still collects are the entries that break a rule, which no
// rebuild can remove.
type checker struct {
	ctx      context.Context
	db       *chain.DB
	failures []chain.Failure
	visited  map[string]bool // tenant + "/" + item
	rebuild  *RebuildStats
}

func (c *checker) fail(chainName string, seq uint64, format string, args ...any) {
	if len(c.failures) >= chain.FailuresMaxDefault {
		return
	}
	c.failures = append(c.failures, chain.Failure{Chain: chainName, Seq: seq,
		Reason: chain.ReasonStateMismatch, Detail: fmt.Sprintf(format, args...)})
}

// firstChain returns the first chain id >= from.
func (c *checker) firstChain(from string) (string, bool, error) {
	var name string
	var found bool
	err := c.db.View(c.ctx, func(tx *chain.Tx) error {
		for h, err := range tx.Chains(from) {
			if err != nil {
				return err
			}
			name, found = h.Chain, true
			break
		}
		return nil
	})
	return name, found, err
}

// definition is the newest definition of an item or location in a catalog.
type definition struct {
	seq   uint64
	value []byte
	scale int // items only; -1 for locations
}

// checkCatalog replays a tenant's catalog chain and compares the last
// definition of every item and location with the stored one.
func (c *checker) checkCatalog(tenant, name string) error {
	c.visited[tenant+"/"+catalogPart+"/"] = true // ids contain no "/": no item collides
	return c.unit(func(tx *chain.Tx) error {
		if err := c.lock(tx, name); err != nil {
			return err
		}
		items, locations := map[string]definition{}, map[string]definition{}
		for e, err := range tx.Entries(name, 1) {
			if err != nil {
				return err
			}
			c.counted()
			switch e.Type {
			case ItemType:
				it, err := DecodeItem(e.Payload)
				if err != nil {
					c.fail(name, e.Seq, "undecodable item definition: %v", err)
					continue
				}
				if old, ok := items[it.ID]; ok && old.scale != int(it.Scale) {
					c.fail(name, e.Seq, "item %q changes scale from %d to %d", it.ID, old.scale, it.Scale)
				}
				items[it.ID] = definition{seq: e.Seq, value: e.Payload, scale: int(it.Scale)}
			case LocationType:
				l, err := DecodeLocation(e.Payload)
				if err != nil {
					c.fail(name, e.Seq, "undecodable location definition: %v", err)
					continue
				}
				locations[l.ID] = definition{seq: e.Seq, value: e.Payload, scale: -1}
			default:
				c.fail(name, e.Seq, "catalog entry of type %q", e.Type)
			}
		}
		for _, kind := range []string{stateItem, stateLocation} {
			rebuilt := items
			if kind == stateLocation {
				rebuilt = locations
			}
			start, end := statePrefix(tenant, kind)
			if c.rebuild != nil {
				if err := c.writeDefinitions(tx, start, end, rebuilt); err != nil {
					return err
				}
				continue
			}
			for kv, err := range tx.StateScan(start, end, false) {
				if err != nil {
					return err
				}
				id := string(kv.Key[len(start):])
				want, ok := rebuilt[id]
				delete(rebuilt, id)
				switch {
				case !ok:
					c.fail(name, 0, "state defines %s %q, the catalog does not", kind, id)
				case len(kv.Value) < 8 || binary.BigEndian.Uint64(kv.Value) != want.seq || !bytes.Equal(kv.Value[8:], want.value):
					c.fail(name, want.seq, "state of %s %q differs from its definition at seq %d", kind, id, want.seq)
				}
			}
			for id, want := range rebuilt {
				c.fail(name, want.seq, "%s %q defined at seq %d is missing from state", kind, id, want.seq)
			}
		}
		return nil
	})
}

// checkItem replays every chain of one item (their ids share prefix) and
// compares balances, total and reversal markers with the stored state.
func (c *checker) checkItem(tenant, itemID, prefix string) error {
	c.visited[tenant+"/"+itemID] = true
	return c.unit(func(tx *chain.Tx) error {
		if c.rebuild != nil {
			if err := c.clearItem(tx, tenant, itemID); err != nil {
				return err
			}
		}
		item, err := GetItemTx(tx, tenant, itemID)
		if errors.Is(err, ErrMalformed) {
			c.fail(strings.TrimSuffix(prefix, "/"), 0, "stored definition of item %q: %v", itemID, err)
			return nil // its balances cannot be read at a scale; checkCatalog reports the definition
		}
		if err != nil && !errors.Is(err, ErrItemNotFound) {
			return err
		}
		defined := err == nil
		total := decimal.MustNew(0, item.Scale)
		totalOK := true
		seen := map[string]bool{}
		for h, err := range tx.Chains(prefix) {
			if err != nil {
				return err
			}
			if !strings.HasPrefix(h.Chain, prefix) {
				break
			}
			location := h.Chain[len(prefix):]
			if validateID(location) != nil {
				continue // not a name this package writes
			}
			if !defined {
				break // see checkUndefined
			}
			seen[location] = true
			balance, err := c.checkChain(tx, tenant, item, location, h.Chain)
			if err != nil {
				return err
			}
			if sum, err := total.Add(balance); err == nil && totalOK {
				total = sum
			} else {
				totalOK = false
			}
		}
		switch {
		case !defined && c.rebuild != nil:
			return nil // clearItem removed its state; an undefined item keeps none
		case !defined:
			return c.checkUndefined(tx, tenant, itemID, prefix)
		case c.rebuild != nil:
			return c.writeTotal(tx, tenant, item, prefix, total, totalOK)
		}
		c.checkTotal(tx, tenant, item, prefix, total, totalOK)
		return c.checkStaleBalances(tx, tenant, itemID, prefix, seen)
	})
}

// checkUndefined handles the chains of an item the tenant never defined.
// This package refuses movements of unknown items, so it wrote nothing there
// and keeps no state for them: such chains (raw appends under a stock-like
// name) are not judged, but any stock state of the item is reported.
func (c *checker) checkUndefined(tx *chain.Tx, tenant, itemID, prefix string) error {
	total := stateKey(tenant, stateTotal, itemID)
	ranges := [][2][]byte{{total, append(append([]byte(nil), total...), 0)}}
	for _, kind := range []string{stateBalance, stateReversed} {
		start, end := statePrefix(tenant, kind, itemID)
		ranges = append(ranges, [2][]byte{start, end})
	}
	for _, r := range ranges {
		for kv, err := range tx.StateScan(r[0], r[1], false) {
			if err != nil {
				return err
			}
			c.fail(strings.TrimSuffix(prefix, "/"), 0, "state %q of item %q, which tenant %q has not defined", kv.Key, itemID, tenant)
		}
	}
	return nil
}

// checkChain replays one location's chain and returns its final balance.
func (c *checker) checkChain(tx *chain.Tx, tenant string, item DefinedItem, location, name string) (decimal.Decimal, error) {
	running := decimal.MustNew(0, item.Scale)
	last := balanceState{}
	for e, err := range tx.Entries(name, 1) {
		if err != nil {
			return decimal.Decimal{}, err
		}
		c.counted()
		last = balanceState{units: running.Units(), seq: e.Seq, timeUnixNano: e.TimeUnixNano}
		if e.Type != MovementType {
			c.fail(name, e.Seq, "entry of type %q in a movement chain", e.Type)
			continue
		}
		m, err := DecodeMovement(e.Payload)
		if err != nil {
			c.fail(name, e.Seq, "undecodable movement: %v", err)
			continue
		}
		next, err := running.Add(m.Quantity)
		if err != nil {
			c.fail(name, e.Seq, "quantity %s at scale %d on balance %s: %v", m.Quantity, m.Quantity.Scale(), running, err)
			continue
		}
		if next != m.Balance {
			c.fail(name, e.Seq, "entry records balance %s, movements sum to %s", m.Balance, next)
		}
		running = next
		last.units = running.Units()
		if m.Kind == KindReversal {
			if err := c.checkMarker(tx, tenant, item.ID, location, name, e.Seq, m); err != nil {
				return decimal.Decimal{}, err
			}
		}
	}
	if c.rebuild != nil {
		return running, c.put(tx, stateKey(tenant, stateBalance, item.ID, location), last.encode())
	}
	stored, err := tx.StateGet(stateKey(tenant, stateBalance, item.ID, location))
	switch {
	case errors.Is(err, chain.ErrNotFound):
		c.fail(name, last.seq, "balance %s at seq %d is missing from state", running, last.seq)
	case err != nil:
		return decimal.Decimal{}, err
	case !bytes.Equal(stored, last.encode()):
		got, _ := decodeBalanceState(stored)
		c.fail(name, last.seq, "state holds balance units %d at seq %d time %d, chain gives %s at seq %d time %d",
			got.units, got.seq, got.timeUnixNano, running, last.seq, last.timeUnixNano)
	}
	return running, nil
}

// checkMarker checks that a reversal entry holds its original's marker and
// reverses an earlier entry of the same chain (Rebuild writes the marker).
func (c *checker) checkMarker(tx *chain.Tx, tenant, item, location, name string, seq uint64, m Movement) error {
	if m.OriginalChain != name || m.OriginalSeq >= seq {
		c.fail(name, seq, "reversal names chain %q seq %d", m.OriginalChain, m.OriginalSeq)
		return nil
	}
	marker := reversedKey(tenant, item, location, m.OriginalSeq)
	if c.rebuild != nil {
		return c.put(tx, marker, binary.BigEndian.AppendUint64(nil, seq))
	}
	v, err := tx.StateGet(marker)
	if err != nil || len(v) != 8 || binary.BigEndian.Uint64(v) != seq {
		c.fail(name, seq, "reversal of seq %d has no marker pointing at it", m.OriginalSeq)
	}
	return nil
}

func (c *checker) checkTotal(tx *chain.Tx, tenant string, item DefinedItem, prefix string, total decimal.Decimal, ok bool) {
	name := strings.TrimSuffix(prefix, "/")
	if !ok {
		c.fail(name, 0, "balances of item %q overflow when summed", item.ID)
		return
	}
	stored, err := tx.StateGet(stateKey(tenant, stateTotal, item.ID))
	if err != nil || len(stored) != 8 {
		c.fail(name, 0, "total %s of item %q is missing from state", total, item.ID)
		return
	}
	if units := int64(binary.BigEndian.Uint64(stored)); units != total.Units() {
		c.fail(name, 0, "state holds total %s of item %q, balances sum to %s",
			decimal.MustNew(units, item.Scale), item.ID, total)
	}
}

// checkStaleBalances reports balance state and reversal markers of an item
// whose chain does not exist or does not hold the reversal.
func (c *checker) checkStaleBalances(tx *chain.Tx, tenant, itemID, prefix string, seen map[string]bool) error {
	start, end := statePrefix(tenant, stateBalance, itemID)
	for kv, err := range tx.StateScan(start, end, false) {
		if err != nil {
			return err
		}
		if location := string(kv.Key[len(start):]); !seen[location] {
			c.fail(prefix+location, 0, "state holds a balance for a chain without entries")
		}
	}
	start, end = statePrefix(tenant, stateReversed, itemID)
	for kv, err := range tx.StateScan(start, end, false) {
		if err != nil {
			return err
		}
		_, _, parts, ok := parseStateKey(kv.Key)
		if !ok || len(kv.Value) != 8 {
			c.fail(prefix, 0, "undecodable reversal marker %q", kv.Key)
			continue
		}
		name, original := prefix+parts[1], binary.BigEndian.Uint64([]byte(parts[2]))
		reversal := binary.BigEndian.Uint64(kv.Value)
		e, err := tx.Get(name, reversal)
		var m Movement
		if err == nil && e.Type == MovementType {
			m, err = DecodeMovement(e.Payload)
		}
		if err != nil || e.Type != MovementType || m.Kind != KindReversal || m.OriginalSeq != original {
			c.fail(name, original, "marker says seq %d reverses seq %d, the chain does not", reversal, original)
		}
	}
	return nil
}

// orphanPageSize is how many state keys one read transaction of
// checkOrphans visits.
const orphanPageSize = 1024

// checkOrphans reports balance, total and marker state of items that have
// no chains at all (the item passes saw every item that has one); Rebuild
// deletes it (rebuild.go).
func (c *checker) checkOrphans() error {
	cursor := []byte(Domain + "/")
	end := prefixEnd(cursor)
	for cursor != nil {
		page := cursor
		var orphans [][]byte
		err := c.db.View(c.ctx, func(tx *chain.Tx) error {
			cursor, orphans = nil, nil
			count := 0
			for kv, err := range tx.StateScan(page, end, false) {
				if err != nil {
					return err
				}
				if count++; count > orphanPageSize {
					cursor = append([]byte(nil), kv.Key...)
					break
				}
				if c.orphan(kv.Key) {
					orphans = append(orphans, append([]byte(nil), kv.Key...))
				}
			}
			return nil
		})
		if err == nil && c.rebuild != nil && len(orphans) > 0 {
			err = c.unit(func(tx *chain.Tx) error { return c.deleteOrphans(tx, orphans) })
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// orphan reports a state key that belongs to no chain the item and catalog
// passes visited.
func (c *checker) orphan(key []byte) bool {
	tenant, kind, parts, ok := parseStateKey(key)
	if !ok {
		c.stray(Domain, 0, "unknown state key %q", key)
		return true
	}
	switch kind {
	case stateBalance, stateTotal, stateReversed:
		if len(parts) == 0 || !c.visited[tenant+"/"+parts[0]] {
			c.stray(tenant+"/"+Domain+"/"+strings.Join(parts[:min(len(parts), 1)], "/"), 0,
				"state %q of an item without movement chains", key)
			return true
		}
	case stateItem, stateLocation:
		if !c.visited[tenant+"/"+catalogPart+"/"] {
			c.stray(tenant+"/"+Domain+"/"+catalogPart, 0, "state %q without a catalog chain", key)
			return true
		}
	default:
		c.stray(Domain, 0, "unknown state key %q", key)
		return true
	}
	return false
}
