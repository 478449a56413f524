package pgbuckets_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ledgerworks/ledger/internal/testbin"
	"github.com/ledgerworks/ledger/storage/postgres/pgtest"
)

func TestMain(m *testing.M) {
	code := m.Run()
	testbin.Remove()
	os.Exit(code)
}

// ledgerctl runs the command to its end and returns its stdout.
func ledgerctl(t *testing.T, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, testbin.Ledgerctl(t), args...)
	cmd.Env = append(os.Environ(), "LEDGER_DB=")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("ledgerctl %v: %v\n%s%s", args, err, stdout.String(), stderr.String())
	}
	return stdout.String()
}

// serveChild starts `ledgerctl serve` as a child process and returns its
// base URL once it listens; the child is killed at the end of the test.
func serveChild(t *testing.T, db string, extra ...string) string {
	t.Helper()
	return testbin.Serve(t, nil, time.Minute, append([]string{"--db", db, "serve", "--addr", "127.0.0.1:0"}, extra...)...).URL
}

// TestThreeServersShareTheKeyRate: three `ledgerctl serve` processes on
// one PostgreSQL database, each with --rate-per-key 10 --rate-key-burst
// 10; 120 requests of one API key spread over them from 12 clients are
// accepted at most burst + rate × elapsed times in all (with buckets per
// process they let about three bursts through), every other one is
// answered 429 with Retry-After, and none 5xx.
func TestThreeServersShareTheKeyRate(t *testing.T) {
	db := pgtest.SchemaURL(t, pgtest.URL(t))
	ledgerctl(t, "--db", db, "init")
	var key struct{ Token string }
	out := ledgerctl(t, "--db", db, "apikey", "create", "--tenant", "acme", "--scopes", "read,write", "-o", "json")
	if err := json.Unmarshal([]byte(out), &key); err != nil || key.Token == "" {
		t.Fatalf("apikey create printed %q: %v", out, err)
	}
	const perKey, burst, requests, clients = 10, 10, 120, 12
	var servers []string
	for range 3 {
		servers = append(servers, serveChild(t, db, "--rate-per-key", fmt.Sprint(perKey), "--rate-key-burst", fmt.Sprint(burst)))
	}
	codes := map[int]int{}
	var mu sync.Mutex
	send := func(base string, i int) {
		req, _ := http.NewRequest(http.MethodPost, base+"/v1/chains/orders/entries", strings.NewReader(`{"type":"t","payload":"cA=="}`))
		req.Header.Set("Authorization", "Bearer "+key.Token)
		req.Header.Set("Idempotency-Key", fmt.Sprint("req-", i))
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Error(err)
			return
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode == http.StatusTooManyRequests && resp.Header.Get("Retry-After") == "" {
			t.Error("429 without Retry-After")
		}
		mu.Lock()
		codes[resp.StatusCode]++
		mu.Unlock()
	}
	start := time.Now()
	var wg sync.WaitGroup
	for c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := c; i < requests; i += clients {
				send(servers[i%len(servers)], i)
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	allowed := burst + perKey*elapsed.Seconds()
	t.Logf("codes %v in %v (at most %.2f accepted)", codes, elapsed, allowed)
	if codes[http.StatusCreated]+codes[http.StatusTooManyRequests] != requests {
		t.Fatalf("codes %v: want only 201 and 429", codes)
	}
	if float64(codes[http.StatusCreated]) > allowed || codes[http.StatusCreated] < burst {
		t.Fatalf("%d accepted in %v: want %d to %.2f", codes[http.StatusCreated], elapsed, burst, allowed)
	}
	// What was accepted was written once each, and nothing else.
	var head struct{ Seq int }
	if err := json.Unmarshal([]byte(ledgerctl(t, "--db", db, "head", "acme/orders", "-o", "json")), &head); err != nil ||
		head.Seq != codes[http.StatusCreated] {
		t.Fatalf("head seq %d (%v), want %d", head.Seq, err, codes[http.StatusCreated])
	}
}
