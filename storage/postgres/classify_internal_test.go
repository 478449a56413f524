package postgres

import (
	"errors"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/ledgerworks/ledger/storage"
)

// A session the server ended is retryable; an authentication failure,
// FATAL as well, is not: no retry cures a wrong password.
func TestClassifyAuthenticationIsNotRetryable(t *testing.T) {
	for _, c := range []struct {
		err       *pgconn.PgError
		retryable bool
	}{
		{&pgconn.PgError{Severity: "FATAL", Code: "28P01", Message: "password authentication failed for user \"ledger\""}, false},
		{&pgconn.PgError{Severity: "FATAL", Code: "28000", Message: "role \"x\" is not permitted to log in"}, false},
		{&pgconn.PgError{Severity: "FATAL", Code: "57P01", Message: "terminating connection due to administrator command"}, true},
		{&pgconn.PgError{Severity: "ERROR", Code: "55P03", Message: "lock timeout"}, true},
	} {
		for _, commit := range []bool{false, true} {
			err := classify(c.err, commit)
			if outage := errors.Is(err, storage.ErrRetry) || errors.Is(err, storage.ErrIO); outage != c.retryable {
				t.Errorf("%s (commit %v): %v: an outage %v, want %v", c.err.Code, commit, err, outage, c.retryable)
			}
			if !errors.Is(err, c.err) {
				t.Errorf("%s: %v lost its cause", c.err.Code, err)
			}
		}
	}
}
