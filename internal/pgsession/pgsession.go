// Package pgsession holds the session settings every PostgreSQL pool of the
// ledger starts with, unless the connection string sets them.
package pgsession

import "github.com/jackc/pgx/v5/pgxpool"

// Defaults sets, on cfg's sessions, each setting below that the connection
// string did not set:
//
//   - plan_cache_mode = force_generic_plan. The ledger's statements are
//     prepared once a connection and run with arrays of a few values
//     (unnest) or one key; PostgreSQL otherwise plans each run again
//     (custom plans win its cost comparison when it knows an array's
//     length), which took about a quarter of its CPU a request under
//     load. Their generic plans are the same index probes and ranges.
func Defaults(cfg *pgxpool.Config) {
	params := cfg.ConnConfig.RuntimeParams
	if _, ok := params["plan_cache_mode"]; !ok {
		params["plan_cache_mode"] = "force_generic_plan"
	}
}
