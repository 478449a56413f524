package postgres

import (
	"context"
	"fmt"
	"slices"

	"github.com/jackc/pgx/v5"

	"github.com/ledgerworks/ledger/internal/pgcolumn"
	"github.com/ledgerworks/ledger/storage"
)

// A batch of keyed appends (chain.Tx.AppendBatch, a group commit of many
// callers) looks every key up before it appends it. One LookupKey at a
// time, each key the chain's filter cannot rule out is a round trip: every
// key of a retried batch, every key of chains too new, too long or too
// rarely written for a filter, and the first key of each chain, which also
// locks the chain's head. PrepareKeys looks the whole batch up in one round
// trip instead: it locks the heads of the batch's chains that the
// transaction does not hold yet (two statements, in ascending order of the
// names), and in the same pipeline one SELECT joins the keys, sent as two
// arrays, with the entries table's unique index. The answers stay in the
// transaction for the LookupKey calls that follow, and the entries found,
// up to PreparedDataBytesMax, for the Entry calls of their replays.
//
// An answer "absent" is kept only for a key whose chain's head was locked
// before the SELECT ran: no other writer can add the key until this
// transaction ends, exactly as for a key LookupKey finds missing under the
// lock. A chain that has no row yet is locked afterwards as LookupKey
// would (a placeholder row); its keys are absent when it is still empty
// then. An answer "found" is true forever: entries never change.

// PreparedDataBytesMax bounds the bytes of stored entries one PrepareKeys
// call keeps for the Entry calls that follow; the entries past it are read
// by Entry as if nothing were prepared.
const PreparedDataBytesMax = 8 << 20

const (
	// sqlLockHeads locks the rows of the named chains that exist, in the
	// order of their names (the rows are sorted before they are locked),
	// and returns them as sqlLockHead does.
	sqlLockHeads = `SELECT chain_id, head_seq, head_hash, head_time, pg_current_xact_id()::text
		FROM chains WHERE chain_id = ANY($1::text[]) ORDER BY chain_id FOR UPDATE`
	// sqlCatchUp returns the entries of each chain of $1 past the seq at
	// the same index of $2 (and at most $3 past it): the ordinal (from 1)
	// of the chain, the entry's seq, its key (NULL when it has none) and
	// its data, NULL past the first $4 bytes of the chain's (the sizes are
	// read from the values' headers, without reading them). Each chain is
	// read as a range of the primary key (the LATERAL subquery, kept apart
	// by its LIMIT): joined as a whole, the planner may pick a hash join
	// over the entries table, which reads every entry of every chain to
	// return the few past the seqs.
	sqlCatchUp = `SELECT k.i, e.seq, e.idempotency_key, CASE WHEN e.upto <= $4 THEN e.data END
		FROM unnest($1::text[], $2::bigint[]) WITH ORDINALITY AS k (chain_id, after, i)
		CROSS JOIN LATERAL (SELECT seq, idempotency_key, data, sum(octet_length(data)) OVER (ORDER BY seq) AS upto
			FROM entries
			WHERE chain_id = k.chain_id COLLATE "C" AND seq > k.after AND seq <= k.after + $3
			ORDER BY seq LIMIT $3) e`
	// sqlPrepareKeys returns the ordinal (from 1) of each (chain, key) pair
	// of the two arrays that an entry holds, with the entry's seq and data.
	// COLLATE "C" makes the comparison the unique index's; the LATERAL
	// subquery (kept apart by its LIMIT) makes each pair one probe of that
	// index rather than a hash join over the whole table.
	sqlPrepareKeys = `SELECT k.i, e.seq, e.data
		FROM unnest($1::text[], $2::text[]) WITH ORDINALITY AS k (chain_id, key, i)
		CROSS JOIN LATERAL (SELECT seq, data FROM entries
			WHERE chain_id = k.chain_id COLLATE "C" AND idempotency_key = k.key COLLATE "C"
			LIMIT 1) e`
)

var _ storage.HeadLocker = (*tx)(nil)

// LockedHeads implements storage.HeadLocker.
func (t *tx) LockedHeads(dst []string) []string {
	for c := range t.heads {
		dst = append(dst, c)
	}
	return append(dst, t.failedHeads...)
}

// PrepareKeys implements storage.KeyPreparer: the keys' answers, read in
// one round trip, for the LookupKey and Entry calls that follow. A failure
// of the round trip leaves nothing prepared; when it ended the server
// transaction (a lock timeout), the calls that follow report it.
func (t *tx) PrepareKeys(ctx context.Context, keys []storage.ChainKey) {
	clear(t.preparedSeqs)
	clear(t.preparedData)
	if t.usable() != nil || len(keys) == 0 {
		return
	}
	keys = keys[:min(len(keys), storage.PrepareKeysMax)]
	if t.absent == nil { // a read-only transaction's, allocated on first use
		t.absent = make(map[chainKey]struct{})
	}
	if t.preparedSeqs == nil {
		t.preparedSeqs = make(map[chainKey]uint64, len(keys))
		t.preparedData = make(map[chainSeq][]byte)
	}
	asked := t.keysToPrepare(keys)
	// The heads to lock: the chains not held yet, those of keys without a
	// key too (storage.HeadLocker), sorted; those that sort below a head
	// already held wait at most UnorderedLockWait, as in lock.
	var unordered, ordered []string
	if t.writable {
		var lock []string
		for _, k := range keys {
			if _, ok := t.heads[k.Chain]; !ok && !unstorable(k.Chain) {
				lock = append(lock, k.Chain)
			}
		}
		slices.Sort(lock)
		lock = slices.Compact(lock)
		split, _ := slices.BinarySearch(lock, t.maxHead)
		unordered, ordered = lock[:split], lock[split:]
	}
	if len(asked)+len(unordered)+len(ordered) == 0 {
		return
	}
	reached := t.ruleOut(asked)
	chains := make([]string, 0, len(asked))
	names := make([]string, 0, len(asked))
	sent := make([]int, 0, len(asked)) // the index in asked of each key sent
	for i, k := range asked {
		if !k.filtered {
			chains, names, sent = append(chains, k.chain), append(names, k.key), append(sent, i)
		}
	}
	var (
		locked []lockedRow
		found  []foundKey
		caught []caughtEntry
	)
	catchChains, catchAfters := t.catchUps(reached, unordered, ordered)
	if len(unordered)+len(ordered)+len(sent) == 0 {
		// Every key ruled out on chains already held: nothing to ask.
		t.keepPrepared(ctx, asked, nil, nil, reached)
		return
	}
	err := t.run(ctx, "prepare keys", false, func(b *pgx.Batch) {
		locked, found = locked[:0], found[:0]
		if len(unordered) > 0 {
			b.Queue(t.b.shortLockWait)
			b.Queue(sqlLockHeads, pgcolumn.TextArray(unordered)).Query(func(rows pgx.Rows) error { return scanLockedRows(rows, &locked) })
			b.Queue(sqlDefaultLockWait)
		}
		if len(ordered) > 0 {
			b.Queue(sqlLockHeads, pgcolumn.TextArray(ordered)).Query(func(rows pgx.Rows) error { return scanLockedRows(rows, &locked) })
		}
		if len(catchChains) > 0 {
			caught = caught[:0]
			b.Queue(sqlCatchUp, pgcolumn.TextArray(catchChains), pgcolumn.Int64Array(catchAfters), int64(KeyFilterCatchUpMax), catchUpBytes(len(catchChains))).Query(func(rows pgx.Rows) error {
				return scanCaught(rows, len(catchChains), &caught)
			})
		}
		if len(sent) > 0 {
			b.Queue(sqlPrepareKeys, pgcolumn.TextArray(chains), pgcolumn.TextArray(names)).Query(func(rows pgx.Rows) error { return scanFoundKeys(rows, len(sent), &found) })
		}
	})
	if err != nil {
		t.failedHeads = append(append(t.failedHeads[:0], unordered...), ordered...)
		return
	}
	if err := t.holdLocked(locked); err != nil {
		return
	}
	for i := range found {
		found[i].index = sent[found[i].index]
	}
	t.catchUp(catchChains, catchAfters, caught, asked, reached)
	t.keepPrepared(ctx, asked, found, append(unordered, ordered...), reached)
	t.buildFilters(ctx, asked)
}

// caughtEntry is a row of sqlCatchUp: the index of the chain in the
// arrays, and an entry ("" for key when it has none).
type caughtEntry struct {
	index int
	seq   uint64
	key   string
	data  []byte
}

// catchUps returns the chains about to be locked whose entries this
// process saw up to a seq, with that seq: those whose key filter ruleOut
// used (reached), and those this process last appended to (seen): their
// entries past it are read in the round trip that locks them.
func (t *tx) catchUps(reached map[string]uint64, lists ...[]string) (chains []string, afters []int64) {
	for _, list := range lists {
		for _, c := range list {
			seq, ok := reached[c]
			if !ok {
				seq, ok = t.b.seen.get(c)
			}
			if ok {
				chains, afters = append(chains, c), append(afters, int64(seq))
			}
		}
	}
	return chains, afters
}

func scanCaught(rows pgx.Rows, n int, caught *[]caughtEntry) error {
	for rows.Next() {
		var (
			i, seq int64
			key    *string
			data   []byte
		)
		if err := rows.Scan(&i, &seq, &key, &data); err != nil {
			return err
		}
		if i < 1 || int(i) > n || seq < 1 {
			return fmt.Errorf("%w: the server answered chain %d of %d, seq %d", storage.ErrCorrupt, i, n, seq)
		}
		e := caughtEntry{index: int(i) - 1, seq: uint64(seq), data: data}
		if key != nil {
			e.key = *key
		}
		*caught = append(*caught, e)
	}
	return rows.Err()
}

// catchUp adds to the key filters of the chains now locked the keys of
// the entries sqlCatchUp read after the locks (every entry between the
// filter's seq and the head locked), when the filter is where ruleOut
// found it and the head at most KeyFilterCatchUpMax past it. reached then
// moves to the head, and a key ruleOut ruled out that is among the new
// entries is prepared as found. The entries themselves are kept for the
// transaction's reads (keepCaught).
func (t *tx) catchUp(chains []string, afters []int64, caught []caughtEntry, asked []preparedKey, reached map[string]uint64) {
	if len(chains) == 0 {
		return
	}
	t.keepCaught(chains, afters, caught)
	fs := t.b.filters
	var newKeys map[chainKey]uint64
	for i, c := range chains {
		lh, held := t.heads[c]
		after := uint64(afters[i])
		if !held || lh.lockedSeq < after || lh.lockedSeq-after > KeyFilterCatchUpMax {
			continue
		}
		f := fs.get(c)
		if f == nil {
			continue
		}
		f.mu.Lock()
		if f.seq == after && !f.full() {
			for _, k := range caught {
				if k.index == i && k.key != "" {
					fs.add(f, k.key)
					if newKeys == nil {
						newKeys = make(map[chainKey]uint64)
					}
					newKeys[chainKey{c, k.key}] = k.seq
				}
			}
			f.seq = lh.lockedSeq
			reached[c] = lh.lockedSeq
		}
		f.mu.Unlock()
	}
	for i := range asked {
		k := &asked[i]
		if !k.filtered {
			continue
		}
		if seq, ok := newKeys[chainKey{k.chain, k.key}]; ok {
			k.filtered, k.found = false, true
			t.preparedSeqs[chainKey{k.chain, k.key}] = seq
		}
	}
}

// preparedKey is a key PrepareKeys asks the server about.
type preparedKey struct {
	chain, key string
	found      bool
	// filtered is set when the chain's key filter rules the key out: it
	// is not sent, and is absent when the filter reached the head locked.
	filtered bool
}

// lockedRow is a head row sqlLockHeads locked.
type lockedRow struct {
	chain   string
	seq, tm int64
	hash    []byte
	xid     string
}

// foundKey is a row of sqlPrepareKeys: the index of the key in the arrays,
// and its entry.
type foundKey struct {
	index int
	seq   uint64
	data  []byte
}

// keysToPrepare returns the keys the server must be asked about: the
// storable ones that neither the transaction's own appends nor an earlier
// look-up answer already.
func (t *tx) keysToPrepare(keys []storage.ChainKey) []preparedKey {
	asked := make([]preparedKey, 0, len(keys))
	for _, k := range keys {
		if k.Key == "" || unstorable(k.Chain) || unstorable(k.Key) {
			continue // LookupKey answers these without the server
		}
		ck := chainKey{k.Chain, k.Key}
		if _, ok := t.byKey[ck]; ok {
			continue
		}
		if _, ok := t.absent[ck]; ok {
			continue
		}
		asked = append(asked, preparedKey{chain: k.Chain, key: k.Key})
	}
	return asked
}

func scanLockedRows(rows pgx.Rows, locked *[]lockedRow) error {
	for rows.Next() {
		var r lockedRow
		if err := rows.Scan(&r.chain, &r.seq, &r.hash, &r.tm, &r.xid); err != nil {
			return err
		}
		*locked = append(*locked, r)
	}
	return rows.Err()
}

func scanFoundKeys(rows pgx.Rows, n int, found *[]foundKey) error {
	for rows.Next() {
		var (
			i, seq int64
			data   []byte
		)
		if err := rows.Scan(&i, &seq, &data); err != nil {
			return err
		}
		if i < 1 || int(i) > n || seq < 1 {
			return fmt.Errorf("%w: the server answered key %d of %d, seq %d", storage.ErrCorrupt, i, n, seq)
		}
		*found = append(*found, foundKey{index: int(i) - 1, seq: uint64(seq), data: data})
	}
	return rows.Err()
}

// holdLocked records the heads sqlLockHeads locked.
func (t *tx) holdLocked(locked []lockedRow) error {
	for _, r := range locked {
		h, _, err := makeHead(r.seq, r.hash, r.tm)
		if err != nil {
			t.err = fmt.Errorf("postgres: prepare keys: chain %q: %w", r.chain, err)
			return t.err
		}
		t.xid = r.xid
		t.heads[r.chain] = &lockedHead{head: h, exists: h.Seq > 0, lockedSeq: h.Seq}
		t.maxHead = max(t.maxHead, r.chain)
	}
	return nil
}

// keepPrepared keeps the answers of one PrepareKeys round trip. lockedNow
// are the chains its statements were to lock: those without a row are
// created and locked now (createHeads), and their keys are absent when the
// chain is still empty under the lock.
func (t *tx) keepPrepared(ctx context.Context, asked []preparedKey, found []foundKey, lockedNow []string, reached map[string]uint64) {
	dataBytes := 0
	for _, f := range found {
		k := &asked[f.index]
		k.found = true
		t.preparedSeqs[chainKey{k.chain, k.key}] = f.seq
		if dataBytes+len(f.data) <= PreparedDataBytesMax {
			t.preparedData[chainSeq{k.chain, f.seq}] = f.data
			dataBytes += len(f.data)
		}
	}
	if !t.writable {
		// One snapshot answers every read of the transaction.
		for _, k := range asked {
			if !k.found {
				t.absent[chainKey{k.chain, k.key}] = struct{}{}
			}
		}
		return
	}
	// Chains still unlocked had no row when the heads were locked.
	var missing []string
	for _, c := range lockedNow {
		if _, ok := t.heads[c]; !ok {
			missing = append(missing, c)
		}
	}
	var stale map[string]bool
	if len(missing) > 0 {
		if t.createHeads(ctx, missing) != nil {
			t.failedHeads = append(t.failedHeads[:0], missing...)
			return // the keys of the chains not locked are looked up as if not prepared
		}
		for _, c := range missing {
			if t.heads[c].lockedSeq > 0 {
				// Created by another transaction since the SELECT ran:
				// its keys' absence was not seen under the lock.
				if stale == nil {
					stale = make(map[string]bool)
				}
				stale[c] = true
			}
		}
	}
	for _, k := range asked {
		lh, locked := t.heads[k.chain]
		switch {
		case k.found || !locked || stale[k.chain]:
			continue
		case k.filtered && lh.lockedSeq != reached[k.chain]:
			continue // the filter did not reach the head locked
		}
		t.absent[chainKey{k.chain, k.key}] = struct{}{}
	}
}

// ruleOut marks the keys of asked that their chain's key filter rules out
// (keyfilter.go), in a writable transaction, and returns the seq each
// filter used had reached: its answers hold if the head, once locked, is
// there. A filter that is behind a head the transaction holds is not used.
func (t *tx) ruleOut(asked []preparedKey) map[string]uint64 {
	if !t.writable {
		return nil
	}
	fs := t.b.filters
	byChain := make(map[string][]int)
	for i, k := range asked {
		byChain[k.chain] = append(byChain[k.chain], i)
	}
	reached := make(map[string]uint64)
	for chain, indexes := range byChain {
		f := fs.get(chain)
		if f == nil {
			continue
		}
		f.mu.Lock()
		lh, held := t.heads[chain]
		if !f.full() && (!held || lh.lockedSeq == f.seq) {
			reached[chain] = f.seq
			for _, i := range indexes {
				asked[i].filtered = !fs.mayContain(f, asked[i].key)
			}
		}
		f.mu.Unlock()
	}
	return reached
}

// buildFilters builds or catches up the key filters of the chains with at
// least KeyFilterMinLookups keys in asked, as that many LookupKey calls
// would, so that the next batch on the chain sends only the keys its
// filter cannot rule out.
func (t *tx) buildFilters(ctx context.Context, asked []preparedKey) {
	if !t.writable || t.usable() != nil {
		return
	}
	counts := make(map[string]int)
	for _, k := range asked {
		counts[k.chain]++
	}
	for chain, n := range counts {
		lh := t.heads[chain]
		if n < KeyFilterMinLookups || lh == nil {
			continue
		}
		lh.lookups += n
		if f := t.b.filters.get(chain); f != nil && f.current(lh.lockedSeq) {
			continue
		}
		if _, err := t.filterAbsent(ctx, chain, lh, ""); err != nil {
			return
		}
	}
}

// createHeads creates and locks the heads of chains (sorted by name) that
// had no row, in one round trip, as lock does for one chain: a placeholder
// row inserted unless a concurrent creator's is there (the insert waits
// for that creator to end), then the row locked. The chains that sort
// below a head the transaction holds wait at most UnorderedLockWait.
func (t *tx) createHeads(ctx context.Context, chains []string) error {
	type created struct {
		inserted, found bool
		head            storage.Head
	}
	results := make([]created, len(chains))
	split, _ := slices.BinarySearch(chains, t.maxHead)
	err := t.run(ctx, "create heads", false, func(b *pgx.Batch) {
		for i, c := range chains {
			r := &results[i]
			if i == 0 && split > 0 {
				b.Queue(t.b.shortLockWait)
			}
			queueCreateHead(b, c, &r.inserted)
			t.queueLockHead(b, c, &r.head, &r.found)
			if i == split-1 {
				b.Queue(sqlDefaultLockWait)
			}
		}
	})
	if err != nil {
		return err
	}
	for i, c := range chains {
		r := results[i]
		if !r.found {
			// The row was inserted or already there, and only this
			// transaction could have deleted it.
			t.err = fmt.Errorf("postgres: create head %q: %w: head row vanished", c, storage.ErrCorrupt)
			return t.err
		}
		t.heads[c] = &lockedHead{head: r.head, exists: r.head.Seq > 0, created: r.inserted, lockedSeq: r.head.Seq}
		t.maxHead = max(t.maxHead, c)
	}
	return nil
}
