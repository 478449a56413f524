package main

import (
	"context"
	"time"

	"github.com/ledgerworks/ledger/chain"
	"github.com/ledgerworks/ledger/storage/postgres"
)

// postgresOptions are the backend options of a command: --lock-timeout bounds
// the wait for a chain head another transaction holds.
func (a *app) postgresOptions(noMigrate bool) postgres.Options {
	timeout := a.lockTimeout
	if timeout == 0 {
		timeout = time.Millisecond // the backend reads zero as "wait as long as it takes"
	}
	return postgres.Options{NoMigrate: noMigrate, LockTimeout: timeout, TracerProvider: a.tracerProvider}
}

// openURL opens a ledger kept in PostgreSQL. Only create applies missing
// schema migrations; otherwise a database without the ledger's schema is an
// error (exit 5), as a missing file is.
func (a *app) openURL(ctx context.Context, databaseURL string, readOnly, create bool) (db *chain.DB, created bool, err error) {
	if create {
		applied, err := postgres.Migrate(ctx, databaseURL)
		if err != nil {
			return nil, false, err
		}
		created = len(applied) > 0 && applied[0] == 1
	}
	backend, err := postgres.Open(ctx, databaseURL, a.postgresOptions(true))
	if err != nil {
		return nil, false, err
	}
	db, err = chain.OpenBackend(backend, a.options(readOnly))
	if err != nil {
		backend.Close()
		return nil, false, err
	}
	return db, created, nil
}

// redactURL hides the password of a database URL in messages.
func redactURL(databaseURL string) string {
	return postgres.RedactURL(databaseURL)
}
