package pgstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/ledgerworks/ledger/chain"
	"github.com/ledgerworks/ledger/idempotency"
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
	args, err := successArgs(resp, expiresAt)
	if err != nil {
		return err
	}
	all := append([]any{sc.Operation, sc.User, sc.Key, token, now}, args...)
	err = tx.ExecAtCommit(idempotency.ErrLeaseLost, s.successTxSQL, all...)
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
