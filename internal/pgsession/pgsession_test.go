package pgsession_test

import (
	"context"
	"os"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/ledgerworks/ledger/internal/pgsession"
)

func TestDefaults(t *testing.T) {
	for _, tc := range []struct{ url, want string }{
		{"postgres://u@127.0.0.1/db", "force_generic_plan"},
		{"postgres://u@127.0.0.1/db?plan_cache_mode=auto", "auto"},
	} {
		cfg, err := pgxpool.ParseConfig(tc.url)
		if err != nil {
			t.Fatal(err)
		}
		pgsession.Defaults(cfg)
		if got := cfg.ConnConfig.RuntimeParams["plan_cache_mode"]; got != tc.want {
			t.Errorf("%s: plan_cache_mode %q, want %q", tc.url, got, tc.want)
		}
	}
}

// The server takes the setting at connect.
func TestDefaultsOnTheServer(t *testing.T) {
	url := os.Getenv("LEDGER_TEST_POSTGRES_URL")
	if url == "" {
		t.Skip("LEDGER_TEST_POSTGRES_URL not set")
	}
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		t.Fatal(err)
	}
	pgsession.Defaults(cfg)
	ctx := context.Background()
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	var mode string
	if err := pool.QueryRow(ctx, "SHOW plan_cache_mode").Scan(&mode); err != nil {
		t.Fatal(err)
	}
	if mode != "force_generic_plan" {
		t.Fatalf("plan_cache_mode %q on the server", mode)
	}
}
