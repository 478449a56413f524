package pgstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/ledgerworks/ledger/chain"
	"github.com/ledgerworks/ledger/idempotency"
	"github.com/ledgerworks/ledger/internal/pgcolumn"
)

var _ idempotency.LedgerTxStore = (*Store)(nil)

// LedgerDB implements idempotency.LedgerTxStore: Options.Ledger, nil
// without one (Context.Update then answers ErrTxUnsupported).
func (s *Store) LedgerDB() *chain.DB { return s.ledger }

// SucceedTx implements idempotency.TxStore: the conditional UPDATE of the
// SUCCESS record runs in tx, the ledger's transaction on this database, so
// that it commits or rolls back with the entries tx appends. It is held
// for the commit (chain.Tx.ExecAtCommit): the records of a whole group
// commit are sent with its entries and COMMIT, in one round trip, and a
// record no longer held fails its request alone. ErrLeaseLost, from the transaction's
// Update, when the attempt no longer holds the record (the rest of the
// group commits without it); idempotency.ErrTxUnsupported when the ledger
// runs no SQL (bbolt).
func (s *Store) SucceedTx(tx *chain.Tx, sc idempotency.Scope, token string, resp idempotency.Response, expiresAt, now time.Time) error {
	headers, err := s.headerJSON(resp.Header)
	if err != nil {
		return err
	}
	a := &successTxArgs{op: pgcolumn.Text(sc.Operation), user: pgcolumn.Text(sc.User), key: pgcolumn.Text(sc.Key),
		token: pgcolumn.Text(token), now: pgcolumn.Time(now), body: pgcolumn.Bytes(resp.Body), expiresAt: pgcolumn.Time(expiresAt)}
	if a.body == nil {
		a.body = pgcolumn.Bytes{}
	}
	// $1 to $9 of successTxSQL: held's, then successSet's. The status
	// (a small int) and the JSON of the headers (for jsonb, which takes no
	// valuer) go as they are.
	a.args = [...]any{&a.op, &a.user, &a.key, &a.token, &a.now, resp.Status, headers, &a.body, &a.expiresAt}
	err = tx.ExecAtCommit(idempotency.ErrLeaseLost, s.successTxSQL, a.args[:]...)
	if errors.Is(err, chain.ErrExecUnsupported) {
		return fmt.Errorf("%w: %w", idempotency.ErrTxUnsupported, err)
	}
	if err != nil {
		return fmt.Errorf("pgstore: SUCCESS in the ledger's transaction: %w", err)
	}
	return nil
}

// Committed implements idempotency.TxStore.
func (s *Store) Committed(ctx context.Context, sc idempotency.Scope, token string) (bool, error) {
	var one int
	err := s.pool.QueryRow(ctx, `SELECT 1 FROM `+s.records+` WHERE operation = $1 AND user_id = $2 AND key = $3
		AND token = $4 AND status = 'SUCCESS'`, sc.Operation, sc.User, sc.Key, token).Scan(&one)
	if errors.Is(err, pgx.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	return true, nil
}

// successTxArgs are the arguments of SucceedTx's statement in one
// allocation: args holds pointers to the other fields, which become
// interface values without allocating (see internal/pgcolumn).
type successTxArgs struct {
	op, user, key, token pgcolumn.Text
	now, expiresAt       pgcolumn.Time
	body                 pgcolumn.Bytes
	args                 [9]any
}
