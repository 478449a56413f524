package postgres_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/ledgerworks/ledger/chain"
	"github.com/ledgerworks/ledger/storage"
	"github.com/ledgerworks/ledger/storage/postgres"
	"github.com/ledgerworks/ledger/storage/postgres/pgtest"
)

// BenchmarkScanKeys reads the key index of a chain of keyScanBenchKeys keyed
// entries the way a verify does, each iteration three ways in turn:
// "records", ScanKeys gathered into batches (a verifier's path on a
// transaction that is no storage.KeyBatchScanner); "batches",
// ScanKeyBatches; and "raw", a baseline that runs ScanKeys's paged query
// with pgx and digests nothing. The ratios are of times (lower is better
// for the first); ns/key is ScanKeyBatches's.
func BenchmarkScanKeys(b *testing.B) {
	const keyScanBenchKeys = 100_000
	be := pgtest.Open(b)
	ctx := context.Background()
	conn, err := pgtest.Connect(ctx, pgtest.URL(b))
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "SET search_path = "+pgx.Identifier{be.Schema()}.Sanitize()); err != nil {
		b.Fatal(err)
	}
	for _, stmt := range []string{
		`INSERT INTO chains VALUES ('c', $1::bigint, '\x` + fmt.Sprintf("%064x", 0) + `', 0)`,
		`INSERT INTO entries SELECT 'c', g, 'op-' || lpad(g::text, 12, '0') || '-0123456789abcdef', '\x00'
			FROM generate_series(1, $1::bigint) g`,
	} {
		if _, err := conn.Exec(ctx, stmt, keyScanBenchKeys); err != nil {
			b.Fatal(err)
		}
	}
	if _, err := conn.Exec(ctx, "ANALYZE entries"); err != nil {
		b.Fatal(err)
	}
	raw := func() int {
		n := 0
		after := int64(0)
		for {
			rows, _ := conn.Query(ctx, `SELECT seq, idempotency_key FROM entries
				WHERE chain_id = $1 AND seq > $2 AND idempotency_key IS NOT NULL ORDER BY seq LIMIT $3`,
				"c", after, postgres.KeyScanPageSize)
			page := 0
			for rows.Next() {
				var key string
				if err := rows.Scan(&after, &key); err != nil {
					b.Fatal(err)
				}
				page++
			}
			if err := rows.Err(); err != nil {
				b.Fatal(err)
			}
			n += page
			if page < postgres.KeyScanPageSize {
				return n
			}
		}
	}
	scans := map[string]func(tx storage.Tx) int{
		"records": func(tx storage.Tx) int {
			n := 0
			batch := make([]storage.KeyRef, 0, storage.KeyBatchSizeMax)
			for ref, err := range tx.ScanKeys(ctx, "c") {
				if err != nil {
					b.Fatal(err)
				}
				if batch = append(batch, ref); len(batch) == cap(batch) {
					n += len(batch)
					batch = batch[:0]
				}
			}
			return n + len(batch)
		},
		"batches": func(tx storage.Tx) int {
			s, ok := tx.(storage.KeyBatchScanner)
			if !ok {
				b.Fatalf("%T is not a storage.KeyBatchScanner", tx)
			}
			n := 0
			for refs, err := range s.ScanKeyBatches(ctx, "c") {
				if err != nil {
					b.Fatal(err)
				}
				n += len(refs)
			}
			return n
		},
	}
	var records, batches, baseline time.Duration
	for b.Loop() {
		for _, name := range []string{"records", "batches"} {
			start := time.Now()
			tx, err := be.Begin(ctx, false)
			if err != nil {
				b.Fatal(err)
			}
			n := scans[name](tx)
			tx.Rollback()
			if n != keyScanBenchKeys {
				b.Fatalf("%s: scanned %d keys, want %d", name, n, keyScanBenchKeys)
			}
			*map[string]*time.Duration{"records": &records, "batches": &batches}[name] += time.Since(start)
		}
		start := time.Now()
		if n := raw(); n != keyScanBenchKeys {
			b.Fatalf("the baseline scanned %d keys, want %d", n, keyScanBenchKeys)
		}
		baseline += time.Since(start)
	}
	perKey := func(d time.Duration) float64 { return float64(d.Nanoseconds()) / float64(b.N*keyScanBenchKeys) }
	b.ReportMetric(perKey(batches), "ns/key")
	b.ReportMetric(perKey(records), "records-ns/key")
	b.ReportMetric(perKey(baseline), "raw-ns/key")
	b.ReportMetric(batches.Seconds()/records.Seconds(), "batches/records")
	b.ReportMetric(batches.Seconds()/baseline.Seconds(), "batches/raw")
	b.ReportMetric(records.Seconds()/baseline.Seconds(), "records/raw")
}

// recordsOnly is a backend whose transactions are plain storage.Txs: no
// ScanKeyBatches, no PrepareKeys, so a verify reads the key index through
// ScanKeys, as it did before ScanKeyBatches.
type recordsOnly struct{ storage.Backend }

type recordsOnlyTx struct{ storage.Tx }

func (b recordsOnly) Begin(ctx context.Context, writable bool) (storage.Tx, error) {
	tx, err := b.Backend.Begin(ctx, writable)
	if err != nil {
		return nil, err
	}
	return recordsOnlyTx{tx}, nil
}

// BenchmarkVerify verifies a chain of 50,000 keyed entries with
// chain.DB.Verify, each iteration twice in turn: through the backend
// (the key index read by ScanKeyBatches) and through the same schema with
// the index read by ScanKeys (recordsOnly). batches/records is the ratio
// of their times (lower is better); ns/entry is the first's.
func BenchmarkVerify(b *testing.B) {
	const entries = 50_000
	bs := pgtest.OpenShared(b, 2)
	db, err := chain.OpenBackend(bs[0], chain.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	plain, err := chain.OpenBackend(recordsOnly{bs[1]}, chain.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer plain.Close()
	ctx := context.Background()
	reqs := make([]chain.Request, 0, 1000)
	for first := 0; first < entries; first += cap(reqs) {
		reqs = reqs[:0]
		for i := range cap(reqs) {
			key := fmt.Sprintf("op-%012d-0123456789abcdef", first+i)
			reqs = append(reqs, chain.Request{Chain: "c", IdempotencyKey: key, Type: "t/v1", Payload: make([]byte, 100)})
		}
		if err := db.Update(ctx, func(tx *chain.Tx) error {
			_, err := tx.AppendBatch(reqs, nil)
			return err
		}); err != nil {
			b.Fatal(err)
		}
	}
	verify := func(db *chain.DB) time.Duration {
		start := time.Now()
		report, err := db.Verify(ctx, chain.VerifyOptions{})
		if err != nil || !report.OK() || report.Entries != entries {
			b.Fatalf("verify: %d entries, %v, %v", report.Entries, report.Failures, err)
		}
		return time.Since(start)
	}
	var batches, records time.Duration
	for b.Loop() {
		batches += verify(db)
		records += verify(plain)
	}
	b.ReportMetric(float64(batches.Nanoseconds())/float64(b.N*entries), "ns/entry")
	b.ReportMetric(float64(records.Nanoseconds())/float64(b.N*entries), "records-ns/entry")
	b.ReportMetric(batches.Seconds()/records.Seconds(), "batches/records")
}
