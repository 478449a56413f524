package postgres_test

import (
	"context"
	"errors"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/ledgerworks/ledger/storage"
	"github.com/ledgerworks/ledger/storage/postgres"
	"github.com/ledgerworks/ledger/storage/postgres/pgtest"
)

// A wrong password is ErrAuthentication, which no caller may take for a
// transient failure: it does not wrap storage.ErrRetry.
func TestWrongPasswordIsAuthenticationNotRetry(t *testing.T) {
	u, err := url.Parse(pgtest.URL(t))
	if err != nil {
		t.Fatal(err)
	}
	user := "ledger"
	if u.User != nil && u.User.Username() != "" {
		user = u.User.Username()
	}
	u.User = url.UserPassword(user, "certainly-not-the-password")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err = postgres.Open(ctx, u.String(), postgres.Options{})
	if !errors.Is(err, postgres.ErrAuthentication) || errors.Is(err, storage.ErrRetry) || errors.Is(err, postgres.ErrRetryable) {
		t.Fatalf("open with a wrong password: %v", err)
	}
	if !strings.Contains(err.Error(), "authentication failed") || strings.Contains(err.Error(), "safe to retry") ||
		strings.Contains(err.Error(), "certainly-not-the-password") {
		t.Fatalf("message %q", err)
	}
}
