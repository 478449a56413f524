package audit_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/ledgerworks/ledger/audit"
	"github.com/ledgerworks/ledger/chain"
)

// BenchmarkCheckpoint makes a ledger of LEDGER_BENCH_CHECKPOINT_CHAINS
// chains (100,000 when unset) of 3 entries each and times
// CreateCheckpoint (every tree head from one snapshot, the checkpoint's
// tree, the signature and the record of the heads) beside the baseline of
// DB.Stats, which lists every chain's head. Report "checkpoint-ns" and
// "ratio" (checkpoint over listing).
func BenchmarkCheckpoint(b *testing.B) {
	chains := 100_000
	if s := os.Getenv("LEDGER_BENCH_CHECKPOINT_CHAINS"); s != "" {
		var err error
		if chains, err = strconv.Atoi(s); err != nil || chains < 1 {
			b.Fatalf("LEDGER_BENCH_CHECKPOINT_CHAINS=%q", s)
		}
	}
	db, err := chain.Open(filepath.Join(b.TempDir(), "ledger.db"), chain.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	ctx := context.Background()
	reqs := make([]chain.Request, 0, 3000)
	for first := 0; first < chains; first += 1000 {
		reqs = reqs[:0]
		for c := first; c < min(first+1000, chains); c++ {
			for e := range 3 {
				reqs = append(reqs, chain.Request{Chain: fmt.Sprintf("tenant-%03d/stock/item-%06d", c%997, c), Type: "bench/v1", Payload: []byte{byte(e)}})
			}
		}
		if _, err := db.AppendBatch(ctx, reqs, nil); err != nil {
			b.Fatal(err)
		}
	}
	var list, make_ time.Duration
	b.ResetTimer()
	for range b.N {
		start := time.Now()
		if _, err := db.Stats(ctx); err != nil {
			b.Fatal(err)
		}
		list += time.Since(start)
		start = time.Now()
		_, cp, err := audit.CreateCheckpoint(ctx, db, testSigner)
		make_ += time.Since(start)
		if err != nil || cp.Size != uint64(chains) {
			b.Fatalf("checkpoint of %d chains: %v", cp.Size, err)
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(make_.Nanoseconds())/float64(b.N), "checkpoint-ns")
	b.ReportMetric(float64(list.Nanoseconds())/float64(b.N), "list-chains-ns")
	b.ReportMetric(float64(make_)/float64(list), "ratio")
}
