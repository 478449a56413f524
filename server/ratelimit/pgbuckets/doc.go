// Package pgbuckets is a ratelimit.Store on PostgreSQL: the token buckets
// of every server instance on one database live in one table, so that N
// instances together allow a key (or an address) its rate once, not N
// times.
//
// # Basics
//
//	store, err := pgbuckets.Open(ctx, url, pgbuckets.Options{Migrate: true})
//	l, err := ratelimit.New(ratelimit.Options{PerKey: 10, KeyBurst: 10, Store: store})
//
// # How a bucket is kept
//
// A bucket is one row, kept as its theoretical arrival time (the generic
// cell rate algorithm, the token bucket's exact equivalent): tat is the
// instant, in microseconds of the database's clock, at which the bucket
// would be full again. A request at now with emission interval T = 1/rate
// and tolerance τ = (burst−1)·T is allowed when max(tat, now) − now ≤ τ,
// and then moves tat to max(tat, now) + T; a refused request changes
// nothing and waits max(tat, now) − now − τ. One INSERT … ON CONFLICT DO
// UPDATE does the test and the move under the row's lock, in one round
// trip, so concurrent requests of several instances are counted exactly;
// the clock is the database's, so the instances' clocks may differ.
// Integers only: T is whole microseconds (a rate of at most
// RateMax a second).
//
// A row whose tat has passed is a full bucket, the same as no row: Take
// deletes such rows, at most SweepBatchMax at a time, once every
// SweepInterval, in the round trip of the Take that finds the interval
// over. The table is created with a fill factor of 50, so that the
// updates of a hot bucket stay on their page (HOT) and write no index.
//
// # Caveats
//
// Each request costs one statement per limit configured (a key's and an
// address's), sent together in one round trip on a connection of the
// store's pool; a refused request whose other bucket had a token gives it
// back in a second round trip.
// All the requests of one key update one row: they serialize on its lock
// for the statement's duration, which bounds one key to some tens of
// thousands of requests a second, far above any rate a per-key limit is
// set to.
package pgbuckets
