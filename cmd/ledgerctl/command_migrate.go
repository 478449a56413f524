package main

import (
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/ledgerworks/ledger/idempotency/pgstore"
	"github.com/ledgerworks/ledger/server/ratelimit/pgbuckets"
	"github.com/ledgerworks/ledger/storage/postgres"
)

func init() { registerCommand(newMigrateCommand) }

// migrateJSON is the shape `migrate -o json` prints.
type migrateJSON struct {
	Database string `json:"database"`
	// Applied lists the schema versions this run applied (none when the
	// schema was current).
	Applied []int `json:"applied"`
	// SchemaVersion is the version the schema has now.
	SchemaVersion int `json:"schema_version"`
}

func newMigrateCommand(a *app) *cobra.Command {
	return &cobra.Command{
		Use:   "migrate",
		Short: "Bring a PostgreSQL ledger's schema up to date (--db postgres://…)",
		Long: "migrate applies the schema migrations a PostgreSQL ledger lacks, in one transaction, and\n" +
			"prints the versions it applied. Commands other than init, demo, import and migrate never\n" +
			"change the schema: they exit 5 on a database whose schema is missing or out of date.\n" +
			"Files need no migration.\n" +
			"It also creates the HTTP replay guard's tables (idempotency_records, idempotency_retry_counts,\n" +
			"idempotency_recovery) and the shared rate limit buckets' (ratelimit_buckets) in the ledger's schema\n" +
			"when they are missing, and brings the guard's tables of an older version to the current one.",
		Args: noArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			name := a.databaseName()
			if !isDatabaseURL(name) {
				return usageErrorf("migrate applies to PostgreSQL ledgers (--db postgres://…); %s is a file", name)
			}
			applied, err := postgres.Migrate(cmd.Context(), name)
			if err != nil {
				return err
			}
			if err := pgstore.Migrate(cmd.Context(), name, ""); err != nil {
				return err
			}
			if err := pgbuckets.Migrate(cmd.Context(), name, ""); err != nil {
				return err
			}
			out := migrateJSON{Database: redactURL(name), Applied: append([]int{}, applied...), SchemaVersion: postgres.SchemaVersion()}
			return a.print(cmd, out, func(w io.Writer) error {
				if len(applied) == 0 {
					_, err := fmt.Fprintf(w, "schema of %s is current (version %d)\n", out.Database, out.SchemaVersion)
					return err
				}
				_, err := fmt.Fprintf(w, "migrated %s to schema version %d (applied %v)\n", out.Database, out.SchemaVersion, applied)
				return err
			})
		},
	}
}
