package financial

import (
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ledgerworks/ledger/chain"
)

// The benchmarks report, beside their own figures, a baseline measured in
// the same run on the same file: raw chain appends of payloads of the same
// size as the postings (throughput) or one raw state read (latency). The
// metric "ratio" is financial ÷ baseline for throughput (higher is better)
// and for latency (lower is better). They never assert on timings.

const benchBatchSize = 256

func openBenchDB(b *testing.B) (*chain.DB, *Book) {
	b.Helper()
	db, err := chain.Open(filepath.Join(b.TempDir(), "ledger.db"), chain.Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { db.Close() })
	book := mustBook(b, db, "acme", "main")
	chart(b, book)
	return db, book
}

// benchPosting is the i-th 3-line posting; effective dates cycle over a
// year, so most postings are back-dated relative to some earlier one.
func benchPosting(i int) Posting {
	return Posting{Key: fmt.Sprintf("bench-%09d", i), Date: MustParseDate("2026-01-01") + Date(i%365),
		Memo: "goods received", Reference: "GRN", Lines: []Line{
			dr("1400", "100.00", "EUR"), cr("2100", "60.00", "EUR"), cr("3000", "40.00", "EUR")}}
}

// rawRequest is a plain chain append of the same size as benchPosting(i).
func rawRequest(i int) chain.Request {
	p := benchPosting(i)
	payload := EncodePosting(&p)
	payload[len(payload)-1] ^= 0xff // different bytes, same size
	return chain.Request{Chain: "acme/raw/journal", IdempotencyKey: keyPosting + p.Key, Type: TypePosting, Payload: payload}
}

func BenchmarkPostBatched(b *testing.B) {
	db, book := openBenchDB(b)
	n := max(b.N, benchBatchSize)
	base := timeBatches(b, db, n, func(tx *chain.Tx, i int) error {
		_, err := tx.Append(rawRequest(i))
		return err
	})
	b.ResetTimer()
	got := timeBatches(b, db, n, func(tx *chain.Tx, i int) error {
		_, err := book.PostTx(tx, benchPosting(i))
		return err
	})
	b.StopTimer()
	reportThroughput(b, n, got, base)
}

// timeBatches runs op for 0..n-1 in transactions of benchBatchSize.
func timeBatches(b *testing.B, db *chain.DB, n int, op func(tx *chain.Tx, i int) error) time.Duration {
	start := time.Now()
	for first := 0; first < n; first += benchBatchSize {
		err := db.Update(ctx, func(tx *chain.Tx) error {
			for i := first; i < min(first+benchBatchSize, n); i++ {
				if err := op(tx, i); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			b.Fatal(err)
		}
	}
	return time.Since(start)
}

func BenchmarkPostConcurrent64(b *testing.B) {
	db, book := openBenchDB(b)
	n := max(b.N, 64)
	base := timeConcurrent(b, n, func(i int) error {
		_, err := db.Append(ctx, rawRequest(i))
		return err
	})
	b.ResetTimer()
	got := timeConcurrent(b, n, func(i int) error {
		_, err := book.Post(ctx, benchPosting(i))
		return err
	})
	b.StopTimer()
	reportThroughput(b, n, got, base)
}

// timeConcurrent runs op for 0..n-1 from 64 goroutines.
func timeConcurrent(b *testing.B, n int, op func(i int) error) time.Duration {
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	start := time.Now()
	for range 64 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := int(next.Add(1) - 1); i < n; i = int(next.Add(1) - 1) {
				if err := op(i); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	close(errs)
	for err := range errs {
		b.Fatal(err)
	}
	return elapsed
}

func reportThroughput(b *testing.B, n int, got, base time.Duration) {
	b.ReportMetric(float64(n)/got.Seconds(), "postings/s")
	b.ReportMetric(float64(n)/base.Seconds(), "raw-appends/s")
	b.ReportMetric(base.Seconds()/got.Seconds(), "ratio")
}

// BenchmarkBalanceRead measures the three balance reads on books of 1,000
// and 1,000,000 3-line postings. Preparing the large book takes a while
// and a few GB of disk; it runs only under -bench.
func BenchmarkBalanceRead(b *testing.B) {
	for _, postings := range []int{1_000, 1_000_000} {
		b.Run(fmt.Sprintf("postings=%d", postings), func(b *testing.B) {
			db, book := openBenchDB(b)
			for first := 0; first < postings; first += 10_000 {
				err := db.Update(ctx, func(tx *chain.Tx) error {
					for i := first; i < min(first+10_000, postings); i++ {
						if _, err := book.PostTx(tx, benchPosting(i)); err != nil {
							return err
						}
					}
					return nil
				})
				if err != nil {
					b.Fatal(err)
				}
			}
			key := book.balanceKey("2100", "EUR")
			rawRead := func(tx *chain.Tx, i int) error {
				_, err := tx.StateGet(key)
				return err
			}
			head := uint64(postings) + 10 // chart entries come first
			for _, read := range []struct {
				name string
				op   func(tx *chain.Tx, i int) error
			}{
				{"current", func(tx *chain.Tx, i int) error {
					_, err := book.BalanceTx(tx, "2100", "EUR")
					return err
				}},
				{"at-seq", func(tx *chain.Tx, i int) error {
					_, err := book.BalanceAtSeqTx(tx, "2100", "EUR", uint64(i*7919)%head)
					return err
				}},
				{"at-date", func(tx *chain.Tx, i int) error {
					_, err := book.BalanceAtDateTx(tx, "2100", "EUR", MustParseDate("2026-01-01")+Date(i*37%365))
					return err
				}},
			} {
				b.Run(read.name, func(b *testing.B) {
					base := timeReads(b, db, rawRead)
					b.ResetTimer()
					got := timeReads(b, db, read.op)
					b.StopTimer()
					b.ReportMetric(float64(base.Nanoseconds())/float64(b.N), "raw-ns/read")
					b.ReportMetric(got.Seconds()/base.Seconds(), "ratio")
				})
			}
		})
	}
}

// timeReads runs b.N reads, each in its own read transaction.
func timeReads(b *testing.B, db *chain.DB, op func(tx *chain.Tx, i int) error) time.Duration {
	start := time.Now()
	for i := range b.N {
		if err := db.View(ctx, func(tx *chain.Tx) error { return op(tx, i) }); err != nil {
			b.Fatal(err)
		}
	}
	return time.Since(start)
}
