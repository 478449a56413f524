package postgres

// The statements the backend runs. Table names are unqualified: every
// connection's search_path names the ledger's schema.
const (
	sqlBeginWrite = "BEGIN ISOLATION LEVEL READ COMMITTED"
	sqlBeginRead  = "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY"
	sqlCommit     = "COMMIT"
	sqlRollback   = "ROLLBACK"

	// sqlXactID returns the transaction's id, to ask pg_xact_status about
	// it if the connection is lost during COMMIT.
	sqlXactID     = "SELECT pg_current_xact_id()::text"
	sqlXactStatus = "SELECT pg_xact_status($1::text::xid8)"
	// sqlTerminate ends the session that still runs the transaction whose
	// COMMIT was lost, so that its outcome becomes final. backend_xid is
	// the low 32 bits of the transaction's xid8.
	sqlTerminate = `SELECT pg_terminate_backend(pid) FROM pg_stat_activity
		WHERE pid = $1 AND backend_xid::text::bigint = ($2::text::numeric % 4294967296)::bigint`

	// sqlCreateHead inserts a placeholder head (head_seq = 0) for a chain
	// that has none. Against an uncommitted placeholder of another
	// transaction it waits for that transaction to end, so creating a chain
	// is race-free. It returns a row only when it inserted one.
	sqlCreateHead = `INSERT INTO chains (chain_id, head_seq, head_hash, head_time)
		VALUES ($1, 0, '\x', 0) ON CONFLICT (chain_id) DO NOTHING RETURNING true`
	// Backend.shortLockWait (SET LOCAL lock_timeout = …) and
	// sqlDefaultLockWait bracket the locking of a head taken out of order
	// (see UnorderedLockWait).
	sqlDefaultLockWait = "SET LOCAL lock_timeout TO DEFAULT"
	// sqlLockHead also returns the transaction id (locking a row assigns one).
	sqlLockHead = `SELECT head_seq, head_hash, head_time, pg_current_xact_id()::text
		FROM chains WHERE chain_id = $1 FOR UPDATE`
	sqlReadHead = "SELECT head_seq, head_hash, head_time FROM chains WHERE chain_id = $1 AND head_seq > 0"
	// sqlDropPlaceholders removes the placeholders of chains this
	// transaction locked but did not append to.
	sqlDropPlaceholders = "DELETE FROM chains WHERE chain_id = ANY($1::text[]) AND head_seq = 0"

	// sqlAppend inserts the buffered entries and moves their chains' heads.
	sqlAppend = `WITH e AS (
			INSERT INTO entries (chain_id, seq, idempotency_key, data)
			SELECT * FROM unnest($1::text[], $2::bigint[], $3::text[], $4::bytea[]))
		UPDATE chains AS c SET head_seq = u.seq, head_hash = u.hash, head_time = u.t
		FROM unnest($5::text[], $6::bigint[], $7::bytea[], $8::bigint[]) AS u (chain_id, seq, hash, t)
		WHERE c.chain_id = u.chain_id`

	// sqlChainKeys returns the keys of the chain's entries in (from, to].
	sqlChainKeys = `SELECT idempotency_key FROM entries
		WHERE chain_id = $1 AND seq > $2 AND seq <= $3 AND idempotency_key IS NOT NULL`

	sqlEntry     = "SELECT data FROM entries WHERE chain_id = $1 AND seq = $2"
	sqlLookupKey = "SELECT seq FROM entries WHERE chain_id = $1 AND idempotency_key = $2"
	sqlEntries   = `SELECT seq, data FROM entries WHERE chain_id = $1 AND seq >= $2
		ORDER BY seq LIMIT $3`
	sqlChains = `SELECT chain_id, head_seq, head_hash, head_time FROM chains
		WHERE chain_id >= $1 AND head_seq > 0 ORDER BY chain_id LIMIT $2`
	sqlChainsAfter = `SELECT chain_id, head_seq, head_hash, head_time FROM chains
		WHERE chain_id > $1 AND head_seq > 0 ORDER BY chain_id LIMIT $2`

	sqlStateGet = "SELECT value FROM state WHERE key = $1"
	// In a writable transaction a state read locks the row it finds, so
	// that two read-modify-write cycles of one key cannot interleave.
	sqlStateGetLock = "SELECT value FROM state WHERE key = $1 FOR UPDATE"
	sqlStatePut     = `INSERT INTO state (key, value) SELECT * FROM unnest($1::bytea[], $2::bytea[])
		ON CONFLICT (key) DO UPDATE SET value = excluded.value`
	sqlStateDelete = "DELETE FROM state WHERE key = ANY($1::bytea[])"
	// StateScan pages: [lo, hi) ascending or descending; after the first
	// page the bound moves past the last key seen.
	sqlStateAsc         = "SELECT key, value FROM state WHERE key >= $1 ORDER BY key LIMIT $2"
	sqlStateAscBounded  = "SELECT key, value FROM state WHERE key >= $1 AND key < $2 ORDER BY key LIMIT $3"
	sqlStateAscAfter    = "SELECT key, value FROM state WHERE key > $1 ORDER BY key LIMIT $2"
	sqlStateAscAfterB   = "SELECT key, value FROM state WHERE key > $1 AND key < $2 ORDER BY key LIMIT $3"
	sqlStateDesc        = "SELECT key, value FROM state WHERE key >= $1 ORDER BY key DESC LIMIT $2"
	sqlStateDescBounded = "SELECT key, value FROM state WHERE key >= $1 AND key < $2 ORDER BY key DESC LIMIT $3"

	sqlStats = `SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0)::bigint
		FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
		WHERE n.nspname = current_schema() AND c.relkind = 'r'
		AND c.relname IN ('chains', 'entries', 'state', 'schema_migrations')`
)
