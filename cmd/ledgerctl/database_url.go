package main

import (
	"context"
	"net/url"

	"github.com/ledgerworks/ledger/chain"
)

// openURL opens a ledger kept in PostgreSQL.
func (a *app) openURL(ctx context.Context, databaseURL string, readOnly bool) (*chain.DB, error) {
	return nil, usageErrorf("--db %s: PostgreSQL ledgers are not supported by this build; give a file path", redactURL(databaseURL))
}

// redactURL hides the password of a database URL in messages.
func redactURL(databaseURL string) string {
	u, err := url.Parse(databaseURL)
	if err != nil {
		return "(unparsable database URL)"
	}
	return u.Redacted()
}
