package bolt_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ledgerworks/ledger/chain"
	"github.com/ledgerworks/ledger/storage/bolt"
)

const (
	memoryChildEnv = "LEDGER_BOLT_MEMORY_CHILD"
	// memoryBoundTest is the bound the test's writer runs under.
	memoryBoundTest = 48 << 20
	// memoryTestKeys is how many keyed entries the child appends: an index
	// sized as without a bound (about 34 bytes a key, twice that with
	// the Go heap's garbage) takes the process past memoryBoundTest.
	memoryTestKeys = 1_000_000
	// memoryTestBatch is the appends of one transaction.
	memoryTestBatch = 1_000
)

// TestMemoryBound runs a writer under MemoryBytesMax that appends keyed
// entries well past what an unbounded index would keep within the bound,
// in a child process whose anonymous memory (RssAnon: not the file's map)
// it samples: the peak stays under the bound. The same child without the
// bound, with the same memory tables, goes past it, so the workload tests
// the bound. After the bounded run every key still replays.
func TestMemoryBound(t *testing.T) {
	if v := os.Getenv(memoryChildEnv); v != "" {
		memoryChild(t, v)
		return
	}
	if testing.Short() {
		t.Skip("writes 2,000,000 keyed entries")
	}
	if raceEnabled {
		t.Skip("the race detector's shadow memory is not the writer's")
	}
	if _, err := os.Stat("/proc/self/status"); err != nil {
		t.Skip("no /proc to read RssAnon from")
	}
	dir := t.TempDir()
	bounded := runMemoryChild(t, filepath.Join(dir, "bounded.db"), memoryBoundTest)
	unbounded := runMemoryChild(t, filepath.Join(dir, "unbounded.db"), -1)
	t.Logf("peak RssAnon: %.1f MiB under a bound of %d MiB, %.1f MiB without", float64(bounded)/(1<<20), memoryBoundTest>>20, float64(unbounded)/(1<<20))
	if bounded > memoryBoundTest {
		t.Errorf("peak RssAnon %d bytes under MemoryBytesMax %d", bounded, memoryBoundTest)
	}
	if unbounded <= memoryBoundTest {
		t.Errorf("peak RssAnon %d bytes without a bound: the workload does not test a bound of %d", unbounded, memoryBoundTest)
	}
}

// runMemoryChild runs the child on a new ledger at path and returns its
// peak RssAnon in bytes.
func runMemoryChild(t *testing.T, path string, bound int64) int64 {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestMemoryBound$", "-test.v")
	cmd.Env = append(os.Environ(), memoryChildEnv+"="+path+","+strconv.FormatInt(bound, 10))
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("child (bound %d): %v\n%s", bound, err, out)
	}
	for line := range strings.Lines(string(out)) {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(line), "peak-rss-anon "); ok {
			n, err := strconv.ParseInt(rest, 10, 64)
			if err != nil {
				t.Fatalf("child output %q: %v", line, err)
			}
			return n
		}
	}
	t.Fatalf("child (bound %d) printed no peak:\n%s", bound, out)
	return 0
}

// memoryChild appends memoryTestKeys keyed entries through the log under
// the bound of arg ("path,bound"), replays a sample of them, and prints
// its peak RssAnon.
func memoryChild(t *testing.T, arg string) {
	path, boundText, _ := strings.Cut(arg, ",")
	bound, err := strconv.ParseInt(boundText, 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	var peak atomic.Int64
	stop := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		for {
			if n, err := rssAnon(); err == nil && n > peak.Load() {
				peak.Store(n)
			}
			select {
			case <-stop:
				return
			case <-time.After(2 * time.Millisecond):
			}
		}
	}()
	opts := bolt.Options{Log: bolt.LogOn, EntryKey: chain.RecordKey, MemoryBytesMax: bound, MemtableBytesMax: memoryBoundTest / 16}
	backend, err := bolt.Open(path, opts)
	if err != nil {
		t.Fatal(err)
	}
	db, err := chain.OpenBackend(backend, chain.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	reqs := make([]chain.Request, 0, memoryTestBatch)
	for next := 0; next < memoryTestKeys; {
		reqs = reqs[:0]
		for ; len(reqs) < memoryTestBatch; next++ {
			reqs = append(reqs, memoryRequest(next))
		}
		err := db.Update(ctx, func(tx *chain.Tx) error {
			_, err := tx.AppendBatch(reqs, nil)
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	for i := 0; i < memoryTestKeys; i += memoryTestKeys / 1000 {
		res, err := db.Append(ctx, memoryRequest(i))
		if err != nil {
			t.Fatal(err)
		}
		if !res.Replayed || res.Entry.Seq != uint64(i+1) {
			t.Fatalf("retry of key %d: replayed %v, seq %d", i, res.Replayed, res.Entry.Seq)
		}
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	close(stop)
	<-sampled
	fmt.Printf("peak-rss-anon %d\n", peak.Load())
}

func memoryRequest(i int) chain.Request {
	return chain.Request{Chain: "stock", IdempotencyKey: "movement-" + strconv.Itoa(i), Type: "moved", Payload: []byte(`{"sku":"A-1","qty":"1"}`)}
}

// rssAnon reads RssAnon from /proc/self/status, in bytes.
func rssAnon() (int64, error) {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return 0, err
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if rest, ok := strings.CutPrefix(s.Text(), "RssAnon:"); ok {
			kib, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			return kib << 10, err
		}
	}
	return 0, errors.New("no RssAnon in /proc/self/status")
}

// TestMemoryBoundOptions checks Open's refusals of options that do not fit
// the bound: nothing is created.
func TestMemoryBoundOptions(t *testing.T) {
	dir := t.TempDir()
	for _, opts := range []bolt.Options{
		{MemoryBytesMax: bolt.MemoryBytesMin - 1},
		{MemoryBytesMax: 64 << 20, MemtableBytesMax: 64<<20/16 + 1},
	} {
		path := filepath.Join(dir, "refused.db")
		_, err := bolt.Open(path, opts)
		if !errors.Is(err, bolt.ErrMemoryBound) {
			t.Errorf("Open(%+v) = %v, want ErrMemoryBound", opts, err)
		}
		if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("Open(%+v) refused, but the file exists (%v)", opts, err)
		}
	}
	b, err := bolt.Open(filepath.Join(dir, "small.db"), bolt.Options{MemoryBytesMax: bolt.MemoryBytesMin})
	if err != nil {
		t.Fatalf("Open at MemoryBytesMin with the default memory table: %v", err)
	}
	b.Close()
}
