-- 0001: chains, entries and the state keyspace.
--
-- Text columns use the "C" collation so that they compare and sort as bytes:
-- chains are listed in byte order of their names, as on every backend.

-- One row per chain: its head (the newest entry's seq, hash and time).
-- A row with head_seq = 0 exists only inside the transaction that first
-- locks a new chain; it is never committed (see storage/postgres/doc.go).
-- Heads are updated on every append; the low fillfactor leaves room on each
-- page for those updates to stay HOT (no index writes).
CREATE TABLE chains (
	chain_id  text COLLATE "C" PRIMARY KEY,
	head_seq  bigint NOT NULL CHECK (head_seq >= 0),
	head_hash bytea  NOT NULL CHECK (octet_length(head_hash) IN (0, 32)),
	head_time bigint NOT NULL
) WITH (fillfactor = 70);

-- One row per entry. data holds the bytes the chain package encoded.
-- An entry without idempotency key stores NULL, and NULLs are distinct in a
-- unique constraint, so only non-empty keys are unique per chain.
CREATE TABLE entries (
	chain_id        text COLLATE "C" NOT NULL,
	seq             bigint NOT NULL CHECK (seq > 0),
	idempotency_key text COLLATE "C" CHECK (idempotency_key <> ''),
	data            bytea NOT NULL,
	CONSTRAINT entries_chain_seq_key PRIMARY KEY (chain_id, seq),
	CONSTRAINT entries_chain_idempotency_key_key UNIQUE (chain_id, idempotency_key)
);

-- The state keyspace: derived state (balances, FIFO layers) of the domain
-- packages, ordered by the bytes of the key.
CREATE TABLE state (
	key   bytea PRIMARY KEY,
	value bytea NOT NULL
);
