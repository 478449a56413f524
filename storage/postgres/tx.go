package postgres

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"iter"
	"net"
	"slices"
	"strings"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/ledgerworks/ledger/internal/pgcolumn"
	"github.com/ledgerworks/ledger/storage"
)

type chainKey struct{ chain, key string }

type chainSeq struct {
	chain string
	seq   uint64
}

// lockedHead is a chain head that a writable transaction holds locked.
type lockedHead struct {
	head      storage.Head
	exists    bool     // the chain has entries; head is valid
	created   bool     // this transaction inserted the placeholder row
	dirty     bool     // head changed by a buffered append
	lockedSeq uint64   // the head's seq when it was locked: entries 1..lockedSeq are committed
	lookups   int      // keyed look-ups on the chain in this transaction
	keys      []string // keys this transaction appended to the chain
}

// pendingEntry is an append not yet sent to the server.
type pendingEntry struct {
	chain string
	seq   uint64
	key   string
	data  []byte
}

// stateWrite is a buffered state write; a nil value deletes the key.
type stateWrite struct {
	value   []byte
	deleted bool
}

// tx is a transaction on one pooled connection.
//
// BEGIN is sent with the first statement. Appends and state writes are
// buffered and sent in one pipelined round trip (multi-row INSERT ... SELECT
// FROM unnest, one UPDATE for all heads) before any scan and at commit,
// together with COMMIT. Point reads (Head, Entry, LookupKey, StateGet)
// answer from the buffer first and otherwise from the server, which already
// holds everything flushed earlier; the union is the transaction's view.
type tx struct {
	b        *Backend
	ctx      context.Context // Begin's context without its cancellation, for Commit and Rollback
	conn     *pgxpool.Conn
	writable bool
	begun    bool   // BEGIN was sent
	done     bool   // Commit or Rollback ended the transaction
	err      error  // the server transaction failed; every later call returns this
	xid      string // the server's transaction id, once known
	pid      uint32 // the server session's process id

	heads   map[string]*lockedHead
	maxHead string // the greatest chain name in heads
	entries []pendingEntry
	bySeq   map[chainSeq]int
	// byKey holds every key the transaction appended, sent or not: once
	// sent, a key is no longer in its chain's key filter's view nor absent,
	// and must still be found.
	byKey  map[chainKey]uint64
	absent map[chainKey]struct{} // keys found missing while the chain was locked (or in a read-only snapshot)
	// preparedSeqs and preparedData are the keys the last PrepareKeys
	// found and the entries it kept (see keyprepare.go).
	preparedSeqs map[chainKey]uint64
	preparedData map[chainSeq][]byte
	// caught holds the entries the head locks' catch-up read (caught.go),
	// caughtBytes their bytes.
	caught      map[string]caughtRun
	caughtBytes int
	state       map[string]stateWrite
	size        int // bytes buffered
	// notifies are the channels to NOTIFY with the commit (notify.go).
	notifies []string
	// failedHeads are the chains whose heads the last failed lock tried
	// to take (LockedHeads).
	failedHeads []string
	// atCommit are the statements held back until the commit.
	atCommit []commitStmt
}

// commitStmt is a statement ExecAtCommit held back.
type commitStmt struct {
	sql  string
	args []any
	none error
}

var _ storage.CommitExecer = (*tx)(nil)

// ExecAtCommit implements storage.CommitExecer. A statement with a none
// error is sent as "WITH held AS (sql RETURNING 1) SELECT 1 / count(*)
// FROM held", so that affecting no row is an error of the server
// (division by zero) which ends the transaction before its COMMIT, in the
// same round trip.
func (t *tx) ExecAtCommit(sql string, args []any, none error) int {
	if none != nil {
		sql = t.b.heldSQL(sql)
	}
	t.atCommit = append(t.atCommit, commitStmt{sql: sql, args: args, none: none})
	return len(t.atCommit) - 1
}

// heldStmt is a statement of ExecAtCommit and its form with a none error.
type heldStmt struct{ sql, held string }

// heldSQL returns sql in the form ExecAtCommit sends with a none error.
// The last one made is kept: a caller queues the same statement for
// every request (a guard's SUCCESS record), which then costs a string
// comparison instead of a new string of the statement's length.
func (b *Backend) heldSQL(sql string) string {
	if last := b.lastHeld.Load(); last != nil && last.sql == sql {
		return last.held
	}
	st := &heldStmt{sql: sql, held: "WITH held AS (" + sql + " RETURNING 1) SELECT 1 / count(*) FROM held"}
	b.lastHeld.Store(st)
	return st.held
}

// queueAtCommit adds the statements held for the commit to b; *ran counts
// those that succeeded.
func (t *tx) queueAtCommit(b *pgx.Batch, ran *int) {
	*ran = 0
	count := func(pgconn.CommandTag) error { // one function for every statement: one allocation a commit
		*ran++
		return nil
	}
	for _, st := range t.atCommit {
		b.Queue(st.sql, st.args...).Exec(count)
	}
}

// atCommitError returns the *storage.CommitExecError of a commit batch
// that failed with err after ran of the held statements succeeded, or nil
// when the failure came after them.
func (t *tx) atCommitError(err error, ran int) error {
	if ran >= len(t.atCommit) {
		return nil
	}
	st := t.atCommit[ran]
	var pgErr *pgconn.PgError
	if st.none != nil && errors.As(err, &pgErr) && pgErr.Code == "22012" {
		return &storage.CommitExecError{Index: ran, Err: st.none}
	}
	return &storage.CommitExecError{Index: ran, Err: classify(err, false)}
}

var _ storage.Tx = (*tx)(nil)

func newTx(ctx context.Context, b *Backend, conn *pgxpool.Conn, writable bool) *tx {
	t := &tx{
		b:        b,
		ctx:      context.WithoutCancel(ctx),
		conn:     conn,
		writable: writable,
		pid:      conn.Conn().PgConn().PID(),
	}
	if writable {
		t.heads = make(map[string]*lockedHead)
		t.bySeq = make(map[chainSeq]int)
		t.byKey = make(map[chainKey]uint64)
		t.absent = make(map[chainKey]struct{})
		t.state = make(map[string]stateWrite)
	}
	return t
}

func (t *tx) Writable() bool { return t.writable }

// usable reports why the transaction cannot run statements, if it cannot.
func (t *tx) usable() error {
	if t.done {
		return storage.ErrTxDone
	}
	return t.err
}

func (t *tx) pending() bool { return len(t.entries) > 0 || len(t.state) > 0 }

// run sends the statements that queue adds in one round trip, preceded by
// BEGIN if the transaction has not begun and by the buffered writes if flush
// is set. Any failure aborts the server transaction and is kept: later calls
// return it. A first round trip that fails because the pooled connection
// turned out to be dead is sent again once on a fresh connection; nothing
// had happened in the transaction yet.
//
// A canceled context stops run before it sends anything, leaving the
// transaction intact. In a writable transaction a round trip that has been
// sent is not interrupted by its context: interrupting it would abort the
// whole transaction, which a group commit shares among callers, and the
// chain package decides a running request's outcome by the commit anyway.
// Options.LockTimeout bounds the waits for heads.
func (t *tx) run(ctx context.Context, op string, flush bool, queue func(b *pgx.Batch)) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("postgres: %s: %w", op, err)
	}
	if t.writable {
		ctx = context.WithoutCancel(ctx)
	}
	for attempt := 0; ; attempt++ {
		b := &pgx.Batch{}
		first := !t.begun
		if first {
			if t.writable {
				b.Queue(sqlBeginWrite)
			} else {
				b.Queue(sqlBeginRead)
			}
		}
		if flush {
			t.queueFlush(b)
		}
		queue(b)
		t.begun = true
		t.b.roundTrips.Add(1)
		err := t.conn.SendBatch(ctx, b).Close()
		if err == nil {
			if flush {
				t.flushed()
			}
			return nil
		}
		if first && attempt == 0 && t.connLost(err) && ctx.Err() == nil {
			if t.reconnect(ctx) == nil {
				continue
			}
		}
		t.err = fmt.Errorf("postgres: %s: %w", op, classify(err, false))
		return t.err
	}
}

// connLost reports whether err ended the connection.
func (t *tx) connLost(err error) bool {
	if t.conn.Conn().IsClosed() {
		return true
	}
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && (pgErr.Severity == "FATAL" || pgErr.Severity == "PANIC")
}

// reconnect replaces a dead connection before the transaction has begun.
func (t *tx) reconnect(ctx context.Context) error {
	t.conn.Release() // destroys the dead connection
	conn, err := t.b.pool.Acquire(ctx)
	if err != nil {
		t.conn = nil
		return err
	}
	t.conn = conn
	t.pid = conn.Conn().PgConn().PID()
	t.begun = false
	t.xid = ""
	return nil
}

// queueFlush adds the buffered writes to b.
func (t *tx) queueFlush(b *pgx.Batch) {
	if n := len(t.entries); n > 0 {
		// The entries and the heads they move, in one statement. Every
		// buffered entry moved its chain's head, so both are non-empty.
		chains := make([]string, n)
		seqs := make([]int64, n)
		keys := make([]string, n) // NULL when empty
		data := make([][]byte, n)
		for i, e := range t.entries {
			chains[i], seqs[i], keys[i], data[i] = e.chain, int64(e.seq), e.key, e.data
		}
		var names []string
		for c, lh := range t.heads {
			if lh.dirty {
				names = append(names, c)
			}
		}
		slices.Sort(names)
		hseqs := make([]int64, len(names))
		hashes := make([][]byte, len(names))
		times := make([]int64, len(names))
		for i, c := range names {
			h := t.heads[c].head
			hseqs[i], hashes[i], times[i] = int64(h.Seq), h.Hash[:], h.TimeUnixNano
		}
		b.Queue(sqlAppend, pgcolumn.TextArray(chains), pgcolumn.Int64Array(seqs), pgcolumn.NullTextArray(keys), pgcolumn.BytesArray(data),
			pgcolumn.TextArray(names), pgcolumn.Int64Array(hseqs), pgcolumn.BytesArray(hashes), pgcolumn.Int64Array(times)).Exec(func(ct pgconn.CommandTag) error {
			if ct.RowsAffected() != int64(len(names)) {
				return fmt.Errorf("%w: updated %d of %d chain heads", storage.ErrCorrupt, ct.RowsAffected(), len(names))
			}
			return nil
		})
	}
	if len(t.state) > 0 {
		keys := make([]string, 0, len(t.state))
		for k := range t.state {
			keys = append(keys, k)
		}
		slices.Sort(keys) // one lock order for all writers
		var putK, putV, delK [][]byte
		for _, k := range keys {
			w := t.state[k]
			if w.deleted {
				delK = append(delK, []byte(k))
			} else {
				putK = append(putK, []byte(k))
				putV = append(putV, w.value)
			}
		}
		if len(putK) > 0 {
			b.Queue(sqlStatePut, putK, putV)
		}
		if len(delK) > 0 {
			b.Queue(sqlStateDelete, delK)
		}
	}
}

var _ storage.Execer = (*tx)(nil)

// Exec implements storage.Execer: the statement is sent on the
// transaction's connection, after the writes buffered so far, which it
// may read.
func (t *tx) Exec(ctx context.Context, sql string, args ...any) (int64, error) {
	if !t.writable {
		return 0, storage.ErrReadOnly
	}
	if err := t.usable(); err != nil {
		return 0, err
	}
	var affected int64
	err := t.run(ctx, "exec", true, func(b *pgx.Batch) {
		b.Queue(sql, args...).Exec(func(ct pgconn.CommandTag) error {
			affected = ct.RowsAffected()
			return nil
		})
	})
	return affected, err
}

// flushed forgets the buffered writes once the server holds them.
func (t *tx) flushed() {
	t.entries = t.entries[:0]
	clear(t.bySeq)
	clear(t.state)
	for _, lh := range t.heads {
		lh.dirty = false
	}
	t.size = 0
}

// flush sends the buffered writes.
func (t *tx) flush(ctx context.Context) error {
	if !t.pending() {
		return nil
	}
	return t.run(ctx, "flush", true, func(*pgx.Batch) {})
}

func (t *tx) Head(ctx context.Context, chain string) (storage.Head, error) {
	if err := t.usable(); err != nil {
		return storage.Head{}, err
	}
	if unstorable(chain) {
		return storage.Head{}, storage.ErrNotFound // no such chain can be stored
	}
	if !t.writable {
		var (
			h     storage.Head
			found bool
		)
		err := t.run(ctx, "head", false, func(b *pgx.Batch) {
			found = false
			b.Queue(sqlReadHead, chain).QueryRow(func(row pgx.Row) error {
				var err error
				h, found, err = scanHeadRow(row)
				return err
			})
		})
		if err != nil {
			return storage.Head{}, err
		}
		if !found {
			return storage.Head{}, storage.ErrNotFound
		}
		return h, nil
	}
	lh, err := t.lock(ctx, chain, nil)
	if err != nil {
		return storage.Head{}, err
	}
	if !lh.exists {
		return storage.Head{}, storage.ErrNotFound
	}
	return lh.head, nil
}

// lock returns the chain's head, locking its row for the rest of the
// transaction on first use. A chain without a row gets a placeholder row
// (head_seq 0) so that there is a row to lock; Commit deletes placeholders
// that did not receive an entry.
//
// extra, if not nil, queues statements that run in the same round trip
// after the lock is taken.
func (t *tx) lock(ctx context.Context, chain string, extra func(b *pgx.Batch)) (*lockedHead, error) {
	if lh, ok := t.heads[chain]; ok {
		return lh, nil
	}
	// Heads taken in ascending byte order wait as long as it takes: no
	// cycle of such waits can form. A head below one this transaction
	// already holds could close a deadlock cycle, so its wait is bounded
	// by UnorderedLockWait instead of the server's deadlock detection.
	unordered := chain < t.maxHead
	var (
		created, found bool
		h              storage.Head
	)
	attempt := func(create bool) error {
		return t.run(ctx, "lock head", false, func(b *pgx.Batch) {
			created = false
			if unordered {
				b.Queue(t.b.shortLockWait)
			}
			if create {
				queueCreateHead(b, chain, &created)
			}
			t.queueLockHead(b, chain, &h, &found)
			if unordered {
				b.Queue(sqlDefaultLockWait)
			}
			if extra != nil {
				extra(b)
			}
		})
	}
	// Most chains exist: lock the row in one statement. A chain without a
	// row takes a second round trip that creates the placeholder first
	// (and runs extra again, now under the lock).
	if err := attempt(false); err != nil {
		t.failedHeads = append(t.failedHeads[:0], chain)
		return nil, err
	}
	if !found {
		if err := attempt(true); err != nil {
			t.failedHeads = append(t.failedHeads[:0], chain)
			return nil, err
		}
	}
	if !found {
		// The row was inserted or already there, and only this
		// transaction could have deleted it.
		t.err = fmt.Errorf("postgres: lock head %q: %w: head row vanished", chain, storage.ErrCorrupt)
		return nil, t.err
	}
	lh := &lockedHead{head: h, exists: h.Seq > 0, created: created, lockedSeq: h.Seq}
	t.heads[chain] = lh
	t.maxHead = max(t.maxHead, chain)
	return lh, nil
}

// queueLockHead queues the lock of chain's head row. Once the batch has
// run, *found reports whether the row exists, *head holds it and t.xid the
// transaction's id; a damaged row fails the batch.
func (t *tx) queueLockHead(b *pgx.Batch, chain string, head *storage.Head, found *bool) {
	*found = false
	b.Queue(sqlLockHead, chain).QueryRow(func(row pgx.Row) error {
		var r lockedRow
		err := row.Scan(&r.seq, &r.hash, &r.tm, &r.xid)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil
		}
		if err != nil {
			return err
		}
		t.xid = r.xid
		*head, *found, err = makeHead(r.seq, r.hash, r.tm)
		return err
	})
}

// queueCreateHead queues the insert of chain's placeholder head row, which
// waits for a concurrent creator to end; once the batch has run, *created
// reports whether this transaction inserted it (false when a row was
// there).
func queueCreateHead(b *pgx.Batch, chain string, created *bool) {
	*created = false
	queueOptionalRow(b, new(bool), []any{created}, sqlCreateHead, chain)
}

// queueOptionalRow queues a query that returns at most one row: the row is
// scanned into dest and *found set; no row leaves *found false and is not an
// error. found is reset when the query is queued, because run may send the
// batch again after reconnecting.
func queueOptionalRow(b *pgx.Batch, found *bool, dest []any, query string, args ...any) {
	*found = false
	b.Queue(query, args...).QueryRow(func(row pgx.Row) error {
		err := row.Scan(dest...)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil
		}
		*found = err == nil
		return err
	})
}

// scanHeadRow scans a head row, reporting whether there was one.
func scanHeadRow(row pgx.Row) (storage.Head, bool, error) {
	var (
		seq, tm int64
		hash    []byte
	)
	err := row.Scan(&seq, &hash, &tm)
	if errors.Is(err, pgx.ErrNoRows) {
		return storage.Head{}, false, nil
	}
	if err != nil {
		return storage.Head{}, false, err
	}
	return makeHead(seq, hash, tm)
}

func makeHead(seq int64, hash []byte, tm int64) (storage.Head, bool, error) {
	h := storage.Head{Seq: uint64(seq), TimeUnixNano: tm}
	if seq == 0 {
		return h, true, nil
	}
	if seq < 0 || len(hash) != storage.HashSize {
		return storage.Head{}, false, fmt.Errorf("%w: head seq %d with a %d-byte hash", storage.ErrCorrupt, seq, len(hash))
	}
	copy(h.Hash[:], hash)
	return h, true, nil
}

func (t *tx) Append(ctx context.Context, chain string, rec storage.Record, head storage.Head) error {
	if err := t.usable(); err != nil {
		return err
	}
	if !t.writable {
		return storage.ErrReadOnly
	}
	if rec.Seq != head.Seq {
		return fmt.Errorf("%w: record seq %d, head seq %d", ErrOutOfOrder, rec.Seq, head.Seq)
	}
	if rec.Seq > MaxSeq {
		return fmt.Errorf("%w: %d", ErrSeqRange, rec.Seq)
	}
	if unstorable(chain) || unstorable(rec.IdempotencyKey) {
		return ErrText
	}
	lh, err := t.lock(ctx, chain, nil)
	if err != nil {
		return err
	}
	var cur uint64
	if lh.exists {
		cur = lh.head.Seq
	}
	if rec.Seq <= cur {
		return fmt.Errorf("%w: chain %q already holds seq %d", storage.ErrDuplicate, chain, rec.Seq)
	}
	if rec.Seq != cur+1 {
		return fmt.Errorf("%w: chain %q is at seq %d, record has seq %d", ErrOutOfOrder, chain, cur, rec.Seq)
	}
	if rec.IdempotencyKey != "" {
		ck := chainKey{chain, rec.IdempotencyKey}
		if _, ok := t.byKey[ck]; ok {
			return fmt.Errorf("%w: chain %q already holds the idempotency key", storage.ErrDuplicate, chain)
		}
		if _, ok := t.preparedSeqs[ck]; ok {
			return fmt.Errorf("%w: chain %q already holds the idempotency key", storage.ErrDuplicate, chain)
		}
		if _, ok := t.absent[ck]; !ok {
			// Not looked up in this transaction yet: ask the server
			// (the head is locked by now, so the answer stays true).
			_, found, err := t.lookupKey(ctx, chain, rec.IdempotencyKey)
			if err != nil {
				return err
			}
			if found {
				return fmt.Errorf("%w: chain %q already holds the idempotency key", storage.ErrDuplicate, chain)
			}
		}
		delete(t.absent, ck)
		t.byKey[ck] = rec.Seq
		lh.keys = append(lh.keys, rec.IdempotencyKey)
	}
	data := make([]byte, len(rec.Data))
	copy(data, rec.Data)
	t.bySeq[chainSeq{chain, rec.Seq}] = len(t.entries)
	t.entries = append(t.entries, pendingEntry{chain: chain, seq: rec.Seq, key: rec.IdempotencyKey, data: data})
	lh.head, lh.exists, lh.dirty = head, true, true
	t.size += len(data) + len(chain) + len(rec.IdempotencyKey) + 16
	if len(t.entries) >= MaxBufferedEntries || t.size >= MaxBufferedBytes {
		return t.flush(ctx)
	}
	return nil
}

func (t *tx) Entry(ctx context.Context, chain string, seq uint64) ([]byte, error) {
	if err := t.usable(); err != nil {
		return nil, err
	}
	if i, ok := t.bySeq[chainSeq{chain, seq}]; ok {
		return t.entries[i].data, nil
	}
	if data, ok := t.preparedData[chainSeq{chain, seq}]; ok {
		return data, nil
	}
	if seq == 0 || seq > MaxSeq || unstorable(chain) {
		return nil, storage.ErrNotFound
	}
	var (
		data  []byte
		found bool
	)
	err := t.run(ctx, "entry", false, func(b *pgx.Batch) {
		queueOptionalRow(b, &found, []any{&data}, sqlEntry, chain, int64(seq))
	})
	if err != nil {
		return nil, err
	}
	if !found {
		return nil, storage.ErrNotFound
	}
	return data, nil
}

// LookupKey returns the seq of the chain's entry with key. In a writable
// transaction it first locks the chain's head, in the same round trip: a
// writer looks a key up to decide whether to append it, and the answer must
// stay true until it commits (a key that is missing under the lock stays
// missing, which spares Append a second look-up).
func (t *tx) LookupKey(ctx context.Context, chain, key string) (uint64, error) {
	if err := t.usable(); err != nil {
		return 0, err
	}
	if key == "" || unstorable(chain) || unstorable(key) {
		return 0, storage.ErrNotFound
	}
	ck := chainKey{chain, key}
	if seq, ok := t.byKey[ck]; ok {
		return seq, nil
	}
	if seq, ok := t.preparedSeqs[ck]; ok {
		return seq, nil
	}
	if _, ok := t.absent[ck]; ok {
		return 0, storage.ErrNotFound
	}
	seq, found, err := t.lookupKey(ctx, chain, key)
	if err != nil {
		return 0, err
	}
	if !found {
		return 0, storage.ErrNotFound
	}
	return seq, nil
}

// lookupKey asks the server, locking the chain's head first in a writable
// transaction.
func (t *tx) lookupKey(ctx context.Context, chain, key string) (uint64, bool, error) {
	var (
		seq   int64
		found bool
	)
	queue := func(b *pgx.Batch) {
		queueOptionalRow(b, &found, []any{&seq}, sqlLookupKey, chain, key)
	}
	var err error
	lh, locked := t.heads[chain]
	switch {
	case t.writable && !locked:
		_, err = t.lock(ctx, chain, queue)
	case t.writable:
		lh.lookups++
		absent, ferr := t.filterAbsent(ctx, chain, lh, key)
		if ferr != nil {
			return 0, false, ferr
		}
		if absent {
			t.absent[chainKey{chain, key}] = struct{}{}
			return 0, false, nil
		}
		err = t.run(ctx, "lookup key", false, queue)
	default:
		err = t.run(ctx, "lookup key", false, queue)
	}
	if err != nil {
		return 0, false, err
	}
	if !found && t.writable {
		t.absent[chainKey{chain, key}] = struct{}{}
	}
	return uint64(seq), found, nil
}

func (t *tx) Entries(ctx context.Context, chain string, fromSeq uint64) iter.Seq2[storage.Record, error] {
	return func(yield func(storage.Record, error) bool) {
		from := max(fromSeq, 1)
		if unstorable(chain) {
			return
		}
		if err := t.usable(); err != nil {
			yield(storage.Record{}, err)
			return
		}
		from, more := t.caughtEntries(chain, from, yield)
		for more && from <= MaxSeq {
			if err := t.usable(); err != nil {
				yield(storage.Record{}, err)
				return
			}
			page := make([]storage.Record, 0, ScanPageSize)
			err := t.run(ctx, "entries", t.pending(), func(b *pgx.Batch) {
				page = page[:0]
				b.Queue(sqlEntries, chain, int64(from), ScanPageSize).Query(func(rows pgx.Rows) error {
					for rows.Next() {
						var (
							seq  int64
							data []byte
						)
						if err := rows.Scan(&seq, &data); err != nil {
							return err
						}
						page = append(page, storage.Record{Seq: uint64(seq), Data: data})
					}
					return rows.Err()
				})
			})
			if err != nil {
				yield(storage.Record{}, err)
				return
			}
			for _, r := range page {
				if !yield(r, nil) {
					return
				}
			}
			if len(page) < ScanPageSize {
				return
			}
			from = page[len(page)-1].Seq + 1
		}
	}
}

func (t *tx) Chains(ctx context.Context, from string) iter.Seq2[storage.ChainHead, error] {
	return func(yield func(storage.ChainHead, error) bool) {
		query, bound := sqlChains, from
		if i := strings.IndexByte(from, 0); i >= 0 {
			// No stored name holds a NUL byte, so the names >= from are
			// the names > its part before the first NUL.
			query, bound = sqlChainsAfter, from[:i]
		}
		if !utf8.ValidString(bound) {
			yield(storage.ChainHead{}, fmt.Errorf("%w: Chains from %q", ErrText, from))
			return
		}
		for {
			if err := t.usable(); err != nil {
				yield(storage.ChainHead{}, err)
				return
			}
			page := make([]storage.ChainHead, 0, ScanPageSize)
			err := t.run(ctx, "chains", t.pending(), func(b *pgx.Batch) {
				page = page[:0]
				b.Queue(query, bound, ScanPageSize).Query(func(rows pgx.Rows) error {
					for rows.Next() {
						var (
							name    string
							seq, tm int64
							hash    []byte
						)
						if err := rows.Scan(&name, &seq, &hash, &tm); err != nil {
							return err
						}
						h, _, err := makeHead(seq, hash, tm)
						if err != nil {
							return fmt.Errorf("chain %q: %w", name, err)
						}
						page = append(page, storage.ChainHead{Chain: name, Head: h})
					}
					return rows.Err()
				})
			})
			if err != nil {
				yield(storage.ChainHead{}, err)
				return
			}
			for _, c := range page {
				if !yield(c, nil) {
					return
				}
			}
			if len(page) < ScanPageSize {
				return
			}
			query, bound = sqlChainsAfter, page[len(page)-1].Chain
		}
	}
}

func (t *tx) StateGet(ctx context.Context, key []byte) ([]byte, error) {
	if err := t.usable(); err != nil {
		return nil, err
	}
	if w, ok := t.state[string(key)]; ok {
		if w.deleted {
			return nil, storage.ErrNotFound
		}
		return w.value, nil
	}
	var (
		value []byte
		found bool
	)
	err := t.run(ctx, "state get", false, func(b *pgx.Batch) {
		query := sqlStateGet
		if t.writable {
			query = sqlStateGetLock
		}
		queueOptionalRow(b, &found, []any{&value}, query, nonNil(key))
	})
	if err != nil {
		return nil, err
	}
	if !found {
		return nil, storage.ErrNotFound
	}
	return value, nil
}

func (t *tx) StatePut(ctx context.Context, key, value []byte) error {
	if err := t.usable(); err != nil {
		return err
	}
	if !t.writable {
		return storage.ErrReadOnly
	}
	v := make([]byte, len(value))
	copy(v, value)
	t.state[string(key)] = stateWrite{value: v}
	t.size += len(key) + len(value) + 16
	if t.size >= MaxBufferedBytes {
		return t.flush(ctx)
	}
	return nil
}

func (t *tx) StateDelete(ctx context.Context, key []byte) error {
	if err := t.usable(); err != nil {
		return err
	}
	if !t.writable {
		return storage.ErrReadOnly
	}
	t.state[string(key)] = stateWrite{deleted: true}
	t.size += len(key) + 16
	if t.size >= MaxBufferedBytes {
		return t.flush(ctx)
	}
	return nil
}

func (t *tx) StateScan(ctx context.Context, start, end []byte, reverse bool) iter.Seq2[storage.KeyValue, error] {
	return func(yield func(storage.KeyValue, error) bool) {
		lo, hi := nonNil(start), end
		if hi != nil && bytes.Compare(lo, hi) >= 0 {
			return
		}
		var last []byte // the last key yielded
		for {
			if err := t.usable(); err != nil {
				yield(storage.KeyValue{}, err)
				return
			}
			var (
				query string
				args  []any
			)
			switch {
			case !reverse && last == nil && hi == nil:
				query, args = sqlStateAsc, []any{lo, ScanPageSize}
			case !reverse && last == nil:
				query, args = sqlStateAscBounded, []any{lo, hi, ScanPageSize}
			case !reverse && hi == nil:
				query, args = sqlStateAscAfter, []any{last, ScanPageSize}
			case !reverse:
				query, args = sqlStateAscAfterB, []any{last, hi, ScanPageSize}
			case last == nil && hi == nil:
				query, args = sqlStateDesc, []any{lo, ScanPageSize}
			case last == nil:
				query, args = sqlStateDescBounded, []any{lo, hi, ScanPageSize}
			default:
				query, args = sqlStateDescBounded, []any{lo, last, ScanPageSize}
			}
			page := make([]storage.KeyValue, 0, ScanPageSize)
			err := t.run(ctx, "state scan", t.pending(), func(b *pgx.Batch) {
				page = page[:0]
				b.Queue(query, args...).Query(func(rows pgx.Rows) error {
					for rows.Next() {
						var kv storage.KeyValue
						if err := rows.Scan(&kv.Key, &kv.Value); err != nil {
							return err
						}
						page = append(page, kv)
					}
					return rows.Err()
				})
			})
			if err != nil {
				yield(storage.KeyValue{}, err)
				return
			}
			for _, kv := range page {
				if !yield(kv, nil) {
					return
				}
			}
			if len(page) < ScanPageSize {
				return
			}
			last = page[len(page)-1].Key
		}
	}
}

// unstorable reports whether s cannot be stored in a text column: it holds
// a NUL byte or is not valid UTF-8.
func unstorable(s string) bool { return strings.IndexByte(s, 0) >= 0 || !utf8.ValidString(s) }

// nonNil maps nil to an empty key: pgx sends a nil slice as NULL.
func nonNil(b []byte) []byte {
	if b == nil {
		return []byte{}
	}
	return b
}

// Commit sends the buffered writes and COMMIT in one round trip. It returns
// nil only after the server confirmed the commit, or after pg_xact_status
// showed that a commit whose confirmation was lost did happen.
func (t *tx) Commit() error {
	if t.done {
		return storage.ErrTxDone
	}
	if t.err != nil {
		err := t.err
		_ = t.Rollback()
		return err
	}
	if !t.writable || !t.begun && !t.pending() && len(t.notifies) == 0 && len(t.atCommit) == 0 {
		return t.Rollback()
	}
	ctx, cancel := context.WithTimeout(t.ctx, t.b.opts.CommitTimeout)
	defer cancel()

	if t.xid == "" {
		// Only state was written: learn the transaction id first, so that
		// a lost COMMIT can be resolved.
		err := t.run(ctx, "commit", false, func(b *pgx.Batch) {
			b.Queue(sqlXactID).QueryRow(func(row pgx.Row) error { return row.Scan(&t.xid) })
		})
		if err != nil {
			_ = t.Rollback()
			return err
		}
	}

	var drop []string
	for c, lh := range t.heads {
		if lh.created && !lh.exists {
			drop = append(drop, c)
		}
	}
	b := &pgx.Batch{}
	var ran int
	t.queueAtCommit(b, &ran)
	t.queueFlush(b)
	if len(drop) > 0 {
		b.Queue(sqlDropPlaceholders, drop)
	}
	var tag string
	t.queueNotifies(b)
	b.Queue(sqlCommit).Exec(func(ct pgconn.CommandTag) error {
		tag = ct.String()
		return nil
	})
	t.b.roundTrips.Add(1)
	err := t.conn.SendBatch(ctx, b).Close()
	switch {
	case tag == "COMMIT":
		// The server confirmed; an error after that (reading the final
		// sync) does not undo it.
		t.committed()
		t.finish()
		return nil
	case err == nil:
		t.finish()
		return fmt.Errorf("postgres: commit: %w: server answered %q", ErrRetryable, tag)
	case !t.connLost(err) || pgconn.SafeToRetry(err):
		// The server refused a statement (nothing after it ran, COMMIT
		// included), or nothing reached the server.
		if held := t.atCommitError(err, ran); held != nil && !t.connLost(err) {
			t.err = held
			_ = t.Rollback()
			return held
		}
		t.err = fmt.Errorf("postgres: commit: %w", classify(err, false))
		_ = t.Rollback()
		return t.err
	}
	// The connection failed after COMMIT may have reached the server.
	pid, xid, heads := t.pid, t.xid, t.heads
	t.finish()
	committed, known := t.b.resolve(t.ctx, pid, xid)
	switch {
	case known && committed:
		t.heads = heads
		t.committed()
		t.heads = nil
		return nil
	case known:
		return fmt.Errorf("postgres: commit: %w: connection lost, transaction %s was rolled back: %w", ErrRetryable, xid, err)
	default:
		return fmt.Errorf("postgres: commit: %w: transaction %s: %w", ErrCommitUnknown, xid, err)
	}
}

// filterAbsent reports whether the chain's key filter proves key absent
// from the entries 1..lh.lockedSeq, building or catching up the filter as
// needed (see keyfilter.go). The chain's head is locked, so no other writer
// adds entries meanwhile.
func (t *tx) filterAbsent(ctx context.Context, chain string, lh *lockedHead, key string) (bool, error) {
	fs := t.b.filters
	f := fs.get(chain)
	if f != nil {
		f.mu.Lock()
		if f.seq > lh.lockedSeq || f.full() || lh.lockedSeq-f.seq > KeyFilterMaxEntries {
			f.mu.Unlock()
			fs.drop(chain)
			f = nil
		}
	}
	if f == nil {
		if lh.lookups < KeyFilterMinLookups || lh.lockedSeq > KeyFilterMaxEntries {
			return false, nil
		}
		f = newKeyFilter(chain, 2*int(lh.lockedSeq))
		f.mu.Lock()
		fs.put(f)
	}
	defer f.mu.Unlock()
	if f.seq < lh.lockedSeq {
		from := f.seq
		err := t.run(ctx, "key filter", false, func(b *pgx.Batch) {
			b.Queue(sqlChainKeys, chain, int64(from), int64(lh.lockedSeq)).Query(func(rows pgx.Rows) error {
				for rows.Next() {
					var k string
					if err := rows.Scan(&k); err != nil {
						return err
					}
					fs.add(f, k)
				}
				return rows.Err()
			})
		})
		if err != nil {
			fs.drop(chain)
			return false, err
		}
		f.seq = lh.lockedSeq
	}
	return !fs.mayContain(f, key), nil
}

// committed adds the keys this transaction appended to the filters of
// their chains, and records the heads it appended to as seen. A filter
// that moved on meanwhile catches up by itself.
func (t *tx) committed() {
	for chain, lh := range t.heads {
		if lh.head.Seq > lh.lockedSeq {
			t.b.seen.set(chain, lh.head.Seq)
		}
		if len(lh.keys) == 0 {
			continue
		}
		f := t.b.filters.get(chain)
		if f == nil {
			continue
		}
		f.mu.Lock()
		if f.seq == lh.lockedSeq {
			for _, k := range lh.keys {
				t.b.filters.add(f, k)
			}
			f.seq = lh.head.Seq
		}
		f.mu.Unlock()
	}
}

// Rollback ends the transaction without writing. The connection goes back
// to the pool, or is closed when it is not cleanly out of the transaction.
//
// A read-only transaction holds no locks and wrote nothing, so its ROLLBACK
// runs in the background and the caller does not wait for the round trip;
// the connection returns to the pool when it is done.
func (t *tx) Rollback() error {
	if t.done {
		return nil
	}
	if t.conn != nil && t.begun && !t.conn.Conn().IsClosed() && t.conn.Conn().PgConn().TxStatus() != 'I' {
		conn, ctx := t.conn, t.ctx
		end := func() {
			ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			_, _ = conn.Exec(ctx, sqlRollback)
			cancel()
			conn.Release()
		}
		t.conn = nil
		if t.writable {
			end()
		} else {
			go end()
		}
	}
	t.finish()
	return nil
}

// finish marks the transaction ended and releases its connection.
func (t *tx) finish() {
	t.done = true
	if t.conn != nil {
		t.conn.Release()
		t.conn = nil
	}
	t.entries, t.bySeq, t.byKey, t.absent, t.state, t.heads = nil, nil, nil, nil, nil, nil
	t.preparedSeqs, t.preparedData, t.caught = nil, nil, nil
}

// resolveGrace is how long resolve lets a transaction stay in progress
// (its session may still be executing the COMMIT it received) before it
// terminates the session.
const resolveGrace = time.Second

// resolve establishes whether transaction xid, whose COMMIT was sent on a
// connection that then failed, committed. It asks pg_xact_status on another
// connection. A transaction that stays in progress for resolveGrace (its
// session is still waiting for the rest of a message, or has not noticed
// the failure) has its session terminated, which makes the outcome final:
// the server rolls back a transaction whose session ends before COMMIT. It
// gives up after CommitTimeout.
func (b *Backend) resolve(ctx context.Context, pid uint32, xid string) (committed, known bool) {
	if xid == "" {
		return false, false
	}
	ctx, cancel := context.WithTimeout(ctx, b.opts.CommitTimeout)
	defer cancel()
	start, terminated := time.Now(), false
	for {
		var status *string
		err := b.pool.QueryRow(ctx, sqlXactStatus, xid).Scan(&status)
		switch {
		case err != nil:
			// The server may be restarting; ask again.
		case status == nil:
			return false, false
		case *status == "committed":
			return true, true
		case *status == "aborted":
			return false, true
		case !terminated && time.Since(start) >= resolveGrace:
			_, err := b.pool.Exec(ctx, sqlTerminate, int64(pid), xid)
			terminated = err == nil
		}
		select {
		case <-ctx.Done():
			return false, false
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// classify maps an error from pgx or PostgreSQL to the storage errors. With
// commit set, a lost connection means the outcome is unknown.
func classify(err error, commit bool) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, storage.ErrCorrupt) {
		return err
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		switch {
		case pgErr.Code == "23505":
			return fmt.Errorf("%w (constraint %s): %w", storage.ErrDuplicate, pgErr.ConstraintName, err)
		case strings.HasPrefix(pgErr.Code, "28"):
			// Invalid authorization (a wrong password, 28P01): not
			// transient, whatever the severity.
			return fmt.Errorf("%w: %w", ErrAuthentication, err)
		case pgErr.Severity == "FATAL" || pgErr.Severity == "PANIC" || strings.HasPrefix(pgErr.Code, "08") ||
			strings.HasPrefix(pgErr.Code, "57P") || pgErr.Code == "53300":
			// The session ended: admin shutdown, crash, terminated,
			// too many connections, server starting.
			if commit {
				return fmt.Errorf("%w: %w", ErrCommitUnknown, err)
			}
			return fmt.Errorf("%w: %w", ErrRetryable, err)
		case pgErr.Code == "40001" || pgErr.Code == "40P01" || pgErr.Code == "55P03":
			return fmt.Errorf("%w: %w", ErrRetryable, err)
		}
		return fmt.Errorf("%w: %w", storage.ErrIO, err)
	}
	if !isConnError(err) {
		// A canceled context, or a failure on the client's side.
		if commit && !pgconn.SafeToRetry(err) {
			return fmt.Errorf("%w: %w", ErrCommitUnknown, err)
		}
		return err
	}
	if commit && !pgconn.SafeToRetry(err) {
		return fmt.Errorf("%w: %w", ErrCommitUnknown, err)
	}
	// A connection that could not be made or that failed: the server
	// rolls back whatever it had of the transaction.
	return fmt.Errorf("%w: %w", ErrRetryable, err)
}

// isConnError reports whether err is a failure to reach the server or a
// connection that broke, as opposed to a canceled context or a client-side
// encoding error.
func isConnError(err error) bool {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return false
	}
	var (
		connectErr *pgconn.ConnectError
		netErr     net.Error
	)
	return errors.As(err, &connectErr) || errors.As(err, &netErr) ||
		errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, pgconn.ErrConnClosed) || errors.Is(err, net.ErrClosed) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE) ||
		errors.Is(err, syscall.ECONNREFUSED)
}
