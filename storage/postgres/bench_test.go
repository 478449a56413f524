package postgres_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/ledgerworks/ledger/chain"
	"github.com/ledgerworks/ledger/storage/postgres/pgtest"
)

// The benchmarks append keyed entries to one chain through chain.DB on
// this backend, and, in the same run against the same tables, through a
// hand-written pgx baseline that does the same inserts the way an
// application would without the engine: BEGIN; SELECT the head FOR UPDATE;
// INSERT the entry (or COPY the batch); UPDATE the head; COMMIT. The
// baseline computes no hashes and checks no keys beyond the unique
// constraint. Each benchmark reports appends/s of both and their ratio
// (ledger/sql above 1 means the engine is faster); ns/op is the engine's.

const benchPayload = 100 // bytes of payload per entry

type benchEnv struct {
	db       *chain.DB
	pool     *pgxpool.Pool
	dataSize int // bytes the engine stores per entry, used by the baseline too
}

func newBenchEnv(b *testing.B) *benchEnv {
	be := pgtest.Open(b)
	ctx := context.Background()
	db, err := chain.OpenBackend(be, chain.Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { db.Close() })
	cfg, err := pgxpool.ParseConfig(pgtest.URL(b))
	if err != nil {
		b.Fatal(err)
	}
	cfg.ConnConfig.RuntimeParams["search_path"] = pgx.Identifier{be.Schema()}.Sanitize()
	cfg.MaxConns = 32
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(pool.Close)
	if _, err := pool.Exec(ctx, `INSERT INTO chains VALUES ('sql', 0, '\x', 0)`); err != nil {
		b.Fatal(err)
	}
	e := chain.Entry{Chain: "ledger", Seq: 1, IdempotencyKey: "op-000000000", Type: "bench/v1", Payload: make([]byte, benchPayload)}
	return &benchEnv{db: db, pool: pool, dataSize: len(chain.EncodeRecord(&e))}
}

func (env *benchEnv) request(i int64) chain.Request {
	return chain.Request{Chain: "ledger", IdempotencyKey: fmt.Sprintf("op-%09d", i), Type: "bench/v1",
		Payload: make([]byte, benchPayload)}
}

func (env *benchEnv) ledgerAppend(b *testing.B, i int64) {
	if _, err := env.db.Append(context.Background(), env.request(i)); err != nil {
		b.Fatal(err)
	}
}

// sqlAppend is the baseline for one append.
func (env *benchEnv) sqlAppend(b *testing.B, i int64) {
	ctx := context.Background()
	tx, err := env.pool.Begin(ctx)
	if err != nil {
		b.Fatal(err)
	}
	defer tx.Rollback(ctx)
	var seq int64
	if err := tx.QueryRow(ctx, "SELECT head_seq FROM chains WHERE chain_id = $1 FOR UPDATE", "sql").Scan(&seq); err != nil {
		b.Fatal(err)
	}
	data := make([]byte, env.dataSize)
	if _, err := tx.Exec(ctx, "INSERT INTO entries (chain_id, seq, idempotency_key, data) VALUES ($1, $2, $3, $4)",
		"sql", seq+1, fmt.Sprintf("op-%09d", i), data); err != nil {
		b.Fatal(err)
	}
	hash := make([]byte, 32)
	if _, err := tx.Exec(ctx, "UPDATE chains SET head_seq = $2, head_hash = $3, head_time = $4 WHERE chain_id = $1",
		"sql", seq+1, hash, time.Now().UnixNano()); err != nil {
		b.Fatal(err)
	}
	if err := tx.Commit(ctx); err != nil {
		b.Fatal(err)
	}
}

// report prints both rates and their ratio.
func report(b *testing.B, appends int64, ledger, sql time.Duration) {
	lr := float64(appends) / ledger.Seconds()
	sr := float64(appends) / sql.Seconds()
	b.ReportMetric(float64(ledger.Nanoseconds())/float64(b.N), "ns/op")
	b.ReportMetric(lr, "ledger-appends/s")
	b.ReportMetric(sr, "sql-appends/s")
	b.ReportMetric(lr/sr, "ledger/sql")
}

// BenchmarkAppendOneAtATime: one caller, one append per transaction,
// alternating engine and baseline.
func BenchmarkAppendOneAtATime(b *testing.B) {
	env := newBenchEnv(b)
	var ledger, sql time.Duration
	i := int64(0)
	for b.Loop() {
		i++
		t0 := time.Now()
		env.ledgerAppend(b, i)
		t1 := time.Now()
		env.sqlAppend(b, i)
		ledger += t1.Sub(t0)
		sql += time.Since(t1)
	}
	report(b, int64(b.N), ledger, sql)
}

// BenchmarkAppend16Callers: 16 goroutines append to the one chain at once;
// the engine groups them into shared commits, the baseline commits each.
func BenchmarkAppend16Callers(b *testing.B) {
	env := newBenchEnv(b)
	const callers = 16
	run := func(n int, op func(b *testing.B, i int64)) time.Duration {
		var next atomic.Int64
		var wg sync.WaitGroup
		start := time.Now()
		for range callers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					i := next.Add(1)
					if i > int64(n) {
						return
					}
					op(b, i)
				}
			}()
		}
		wg.Wait()
		return time.Since(start)
	}
	// Warm both up (connections, prepared statements).
	run(callers, env.ledgerAppend)
	run(callers, env.sqlAppend)
	var ledger, sql time.Duration
	base := int64(callers)
	for b.Loop() {
		// Each iteration is a round of 16 appends per side.
		offset := base
		ledger += run(callers, func(b *testing.B, i int64) { env.ledgerAppend(b, offset+i) })
		sql += run(callers, func(b *testing.B, i int64) { env.sqlAppend(b, offset+i) })
		base += callers
	}
	report(b, int64(b.N)*callers, ledger, sql)
}

// BenchmarkAppendBatch1000: one transaction of 1,000 appends per iteration:
// chain.DB.Update against BEGIN, SELECT FOR UPDATE, COPY, UPDATE, COMMIT.
// With keys, the engine looks each key up before it appends (one round trip
// per key: the storage contract looks keys up one at a time); the baseline
// leaves that to the unique constraint. Without keys the engine sends the
// whole batch in one multi-row insert at commit.
func BenchmarkAppendBatch1000(b *testing.B) {
	for _, keyed := range []bool{true, false} {
		b.Run(map[bool]string{true: "keyed", false: "unkeyed"}[keyed], func(b *testing.B) {
			env := newBenchEnv(b)
			ctx := context.Background()
			const batch = 1000
			var ledger, sql time.Duration
			next := int64(0)
			for b.Loop() {
				first := next
				t0 := time.Now()
				err := env.db.Update(ctx, func(tx *chain.Tx) error {
					for i := range int64(batch) {
						req := env.request(first + i)
						if !keyed {
							req.IdempotencyKey = ""
						}
						if _, err := tx.Append(req); err != nil {
							return err
						}
					}
					return nil
				})
				if err != nil {
					b.Fatal(err)
				}
				t1 := time.Now()
				env.sqlBatch(b, first, batch, keyed)
				ledger += t1.Sub(t0)
				sql += time.Since(t1)
				next += batch
			}
			report(b, int64(b.N)*batch, ledger, sql)
		})
	}
}

func (env *benchEnv) sqlBatch(b *testing.B, first int64, n int, keyed bool) {
	ctx := context.Background()
	tx, err := env.pool.Begin(ctx)
	if err != nil {
		b.Fatal(err)
	}
	defer tx.Rollback(ctx)
	var seq int64
	if err := tx.QueryRow(ctx, "SELECT head_seq FROM chains WHERE chain_id = $1 FOR UPDATE", "sql").Scan(&seq); err != nil {
		b.Fatal(err)
	}
	rows := make([][]any, n)
	for i := range rows {
		var key *string
		if keyed {
			k := fmt.Sprintf("op-%09d", first+int64(i))
			key = &k
		}
		rows[i] = []any{"sql", seq + 1 + int64(i), key, make([]byte, env.dataSize)}
	}
	if _, err := tx.CopyFrom(ctx, pgx.Identifier{"entries"}, []string{"chain_id", "seq", "idempotency_key", "data"},
		pgx.CopyFromRows(rows)); err != nil {
		b.Fatal(err)
	}
	if _, err := tx.Exec(ctx, "UPDATE chains SET head_seq = $2, head_hash = $3, head_time = $4 WHERE chain_id = $1",
		"sql", seq+int64(n), make([]byte, 32), time.Now().UnixNano()); err != nil {
		b.Fatal(err)
	}
	if err := tx.Commit(ctx); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkAppendBatchPrepared: one Update of 1,000 keyed appends per
// iteration, with tx.AppendBatch (the keys prepared in one round trip,
// storage.KeyPreparer) against the same requests with one tx.Append each
// (each key the chain's filter cannot rule out is a round trip), measured
// alternately on the same chains. The cases: fresh keys on one chain (the
// filter rules most out), fresh keys spread over 100 and 1,000 existing
// chains (too few per chain for a filter) or over 100 chains the batch
// creates, and a retried batch on one chain (every key found: each replay
// looks the key up and reads its entry).
// The two alternate which goes first. batch/append above 1 means
// AppendBatch is faster.
func BenchmarkAppendBatchPrepared(b *testing.B) {
	cases := []struct {
		name      string
		chains    int
		replay    bool
		newChains bool // each batch on chains of its own, created by it
	}{
		{"fresh/1chain", 1, false, false},
		{"fresh/100chains", 100, false, false},
		{"fresh/1000chains", 1000, false, false},
		{"fresh/100newchains", 100, false, true},
		{"replay/1chain", 1, true, false},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			env := newBenchEnv(b)
			ctx := context.Background()
			const batch = 1000
			requests := func(first int64) []chain.Request {
				reqs := make([]chain.Request, batch)
				for i := range reqs {
					reqs[i] = env.request(first + int64(i))
					reqs[i].Chain = fmt.Sprintf("ledger-%d", i%c.chains)
					if c.newChains {
						reqs[i].Chain = fmt.Sprintf("ledger-%d-%d", first, i%c.chains)
					}
				}
				return reqs
			}
			run := func(reqs []chain.Request, batched, replay bool) time.Duration {
				start := time.Now()
				replayed := 0
				err := env.db.Update(ctx, func(tx *chain.Tx) error {
					replayed = 0
					if batched {
						results, err := tx.AppendBatch(reqs, make([]chain.Result, 0, len(reqs)))
						for _, r := range results {
							if r.Replayed {
								replayed++
							}
						}
						return err
					}
					for _, req := range reqs {
						r, err := tx.Append(req)
						if err != nil {
							return err
						}
						if r.Replayed {
							replayed++
						}
					}
					return nil
				})
				if err != nil {
					b.Fatal(err)
				}
				if want := map[bool]int{true: len(reqs), false: 0}[replay]; replayed != want {
					b.Fatalf("%d of %d appends replayed, want %d", replayed, len(reqs), want)
				}
				return time.Since(start)
			}
			// Every chain exists and holds a batch of keys: the one a
			// replay retries.
			next := int64(0)
			retried := requests(next)
			run(retried, false, false)
			next += batch
			var batched, single time.Duration
			for i := 0; b.Loop(); i++ {
				batchReqs, singleReqs := retried, retried
				if !c.replay {
					batchReqs, singleReqs = requests(next), requests(next+batch)
					next += 2 * batch
				}
				// Each goes first every other iteration: the second of a
				// pair runs on a server the first has just written to.
				if i%2 == 0 {
					batched += run(batchReqs, true, c.replay)
					single += run(singleReqs, false, c.replay)
				} else {
					single += run(singleReqs, false, c.replay)
					batched += run(batchReqs, true, c.replay)
				}
			}
			br := float64(b.N*batch) / batched.Seconds()
			sr := float64(b.N*batch) / single.Seconds()
			b.ReportMetric(float64(batched.Nanoseconds())/float64(b.N), "ns/op")
			b.ReportMetric(br, "batch-appends/s")
			b.ReportMetric(sr, "append-appends/s")
			b.ReportMetric(br/sr, "batch/append")
		})
	}
}

// BenchmarkAppendBatchRetried retries a batch of 1,000 stored requests on
// 10 chains: with chain.DB.AppendBatch, which reads them in one statement
// without a transaction (ReadKeys), beside Update with Tx.AppendBatch, which
// prepares them in a write transaction, alternated in the same run.
func BenchmarkAppendBatchRetried(b *testing.B) {
	env := newBenchEnv(b)
	ctx := context.Background()
	reqs := make([]chain.Request, 1000)
	for i := range reqs {
		reqs[i] = env.request(int64(i))
		reqs[i].Chain = fmt.Sprintf("ledger-%d", i%10)
	}
	if _, err := env.db.AppendBatch(ctx, reqs, nil); err != nil {
		b.Fatal(err)
	}
	results := make([]chain.Result, 0, len(reqs))
	check := func(results []chain.Result, err error) {
		if err != nil {
			b.Fatal(err)
		}
		for _, r := range results {
			if !r.Replayed {
				b.Fatalf("key %s appended again", r.Entry.IdempotencyKey)
			}
		}
	}
	var read, updated time.Duration
	for i := 0; b.Loop(); i++ {
		for j := range 2 {
			start := time.Now()
			if (i+j)%2 == 0 {
				var err error
				results, err = env.db.AppendBatch(ctx, reqs, results[:0])
				check(results, err)
				read += time.Since(start)
				continue
			}
			err := env.db.Update(ctx, func(tx *chain.Tx) error {
				var err error
				results, err = tx.AppendBatch(reqs, results[:0])
				return err
			})
			check(results, err)
			updated += time.Since(start)
		}
	}
	rr := float64(b.N*len(reqs)) / read.Seconds()
	ur := float64(b.N*len(reqs)) / updated.Seconds()
	b.ReportMetric(float64(read.Nanoseconds())/float64(b.N), "ns/op")
	b.ReportMetric(rr, "read-replays/s")
	b.ReportMetric(ur, "update-replays/s")
	b.ReportMetric(rr/ur, "read/update")
}
