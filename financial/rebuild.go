package financial

import (
	"bytes"
	"context"
	"errors"

	"github.com/ledgerworks/ledger/chain"
)

// RebuildStats is what Rebuild did.
type RebuildStats struct {
	Transactions int64 // write transactions: one per book and per stray book or key
	Entries      int64 // journal entries replayed
	Written      int64 // state keys written
	Deleted      int64 // state keys deleted: each book's previous state, and stray keys
	// Failures are the journal entries that break a rule of this package
	// (an undecodable payload, a posting to an undefined account, at most
	// FailuresMax): no state can make them right, so Check still reports
	// them.
	Failures []chain.Failure
}

// Rebuild recomputes the derived state of every book of every tenant from
// its journal, as Check does, and writes it in place of the stored state:
// account and currency definitions, balances, the seq and day indexes and
// the date-range totals. State of books without a journal and keys under
// fin/ that belong to no book are deleted. Afterwards Check reports only
// Failures.
//
// Each book is rebuilt in one write transaction that locks its journal's
// head (as every write to the book does), deletes the book's state, replays
// the journal and writes the result, so no posting interleaves with it. The
// transaction holds the book's whole state: a rebuild's memory and
// transaction size grow with the largest book, not with the ledger.
func Rebuild(ctx context.Context, db *chain.DB) (RebuildStats, error) {
	var stats RebuildStats
	books := map[string]bool{}
	for h, err := range db.Chains(ctx, "") {
		if err != nil {
			return stats, err
		}
		parts := chain.SplitScopedName(h.Chain)
		if len(parts) != 4 || parts[1] != Domain || parts[3] != journalName {
			continue
		}
		b, err := NewBook(db, parts[0], parts[2])
		if err != nil {
			continue // not a name this package writes
		}
		books[b.prefix] = true
		if err := b.rebuild(ctx, &stats); err != nil {
			return stats, err
		}
	}
	err := checkOrphans(ctx, db, books, nil, &rebuilder{stats: &stats})
	return stats, err
}

// Rebuild rebuilds this book alone from its journal, as the package's
// Rebuild does for every book.
func (b *Book) Rebuild(ctx context.Context) (RebuildStats, error) {
	var stats RebuildStats
	err := b.rebuild(ctx, &stats)
	return stats, err
}

func (b *Book) rebuild(ctx context.Context, stats *RebuildStats) error {
	r := &rebuilder{stats: stats}
	return r.unit(ctx, b.db, func(tx *chain.Tx) error {
		add := func(f chain.Failure) {
			if len(stats.Failures) < FailuresMax {
				stats.Failures = append(stats.Failures, f)
			}
		}
		c := newChecker(b, tx, add)
		c.rebuild = r
		return c.rebuildBook()
	})
}

// rebuilder is the part of a checker that writes.
type rebuilder struct {
	stats *RebuildStats
	// While a state scan is open its keys must not change: puts wait in
	// pending until it ends.
	scanning bool
	pending  [][2][]byte
}

// unit runs fn in a read transaction for Check (r is nil) and in a write
// transaction for Rebuild. An Update function may run more than once, so
// each run starts from the counts the first began with.
func (r *rebuilder) unit(ctx context.Context, db *chain.DB, fn func(tx *chain.Tx) error) error {
	if r == nil {
		return db.View(ctx, fn)
	}
	saved := *r.stats
	saved.Transactions++
	return db.Update(ctx, func(tx *chain.Tx) error {
		*r.stats, r.scanning, r.pending = saved, false, nil
		return fn(tx)
	})
}

func (r *rebuilder) put(tx *chain.Tx, key, value []byte) error {
	r.stats.Written++
	if r.scanning {
		r.pending = append(r.pending, [2][]byte{bytes.Clone(key), bytes.Clone(value)})
		return nil
	}
	return tx.StatePut(key, value)
}

func (r *rebuilder) flush(tx *chain.Tx) error {
	for _, kv := range r.pending {
		if err := tx.StatePut(kv[0], kv[1]); err != nil {
			return err
		}
	}
	r.pending = nil
	return nil
}

// deleteRange deletes every state key in [start, end).
func (r *rebuilder) deleteRange(tx *chain.Tx, start, end []byte) error {
	deleted, err := tx.StateDeleteRange(start, end)
	r.stats.Deleted += deleted
	return err
}

// deleteStray deletes a key that belongs to no book, or the state of a
// book whose journal does not exist, after making sure in this transaction
// that it still does not (a first posting may have created it since).
func (r *rebuilder) deleteStray(tx *chain.Tx, key []byte, book string) error {
	if book == "" {
		r.stats.Deleted++
		return tx.StateDelete(key)
	}
	if _, err := tx.Head(journalOf(book)); !errors.Is(err, chain.ErrNotFound) {
		return err // nil: the book has a journal now, and its own state
	}
	prefix := []byte(book)
	return r.deleteRange(tx, prefix, prefixEnd(prefix))
}

// rebuildBook replaces the book's state with what its journal implies.
func (c *checker) rebuildBook() error {
	if _, err := c.tx.Head(c.b.journal); err != nil && !errors.Is(err, chain.ErrNotFound) {
		return err
	}
	prefix := []byte(c.b.prefix)
	if err := c.rebuild.deleteRange(c.tx, prefix, prefixEnd(prefix)); err != nil {
		return err
	}
	if err := c.replay(); err != nil { // writes the seq and day indexes
		return err
	}
	for _, code := range sortedKeys(c.accounts) {
		if err := c.rebuild.put(c.tx, c.b.accountKey(code), encodeAccountState(c.accounts[code])); err != nil {
			return err
		}
	}
	for _, code := range sortedKeys(c.currencies) {
		if err := c.rebuild.put(c.tx, c.b.currencyKey(code), encodeCurrencyState(c.currencies[code])); err != nil {
			return err
		}
	}
	for _, name := range sortedKeys(c.pairs) {
		if err := c.rebuildPair(name); err != nil {
			return err
		}
	}
	return nil
}

// rebuildPair writes one account's balance in one currency and its
// date-range totals, which Check's tree pass computes from the day index
// just written.
func (c *checker) rebuildPair(name string) error {
	p := c.pairs[name]
	if p.state.postings == 0 {
		return nil
	}
	account, currency, _ := splitPair(name)
	if err := c.rebuild.put(c.tx, c.b.balanceKey(account, currency), p.state.encode()); err != nil {
		return err
	}
	day := c.b.pairPrefix(sectionDay, account, currency)
	tree := &treeCheck{}
	c.rebuild.scanning = true
	for kv, err := range c.tx.StateScan(day, prefixEnd(day), false) {
		if err != nil {
			return err
		}
		if err := c.stateDay(tree, kv.Key[len(c.b.prefix)+len(sectionDay):], kv.Value); err != nil {
			return err
		}
	}
	err := c.flushTree(tree)
	c.rebuild.scanning = false
	if err != nil {
		return err
	}
	return c.rebuild.flush(c.tx)
}
