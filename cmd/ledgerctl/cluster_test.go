package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ledgerworks/ledger/api"
	"github.com/ledgerworks/ledger/internal/testbin"
	"github.com/ledgerworks/ledger/storage/postgres/pgtest"
)

// TestBinaryServersShareOnePostgres starts three `ledgerctl serve` processes
// on one PostgreSQL and sends them keyed raw appends over 8 chains from 64
// clients at once, each request to one server and its retry, with the same
// key and body, to the next: every request is answered 201, every retry
// with the first answer's bytes, and each chain holds exactly the entries
// of its requests. Group commits of the three processes lock the same
// chains' heads at once; none of them may fail a request.
func TestBinaryServersShareOnePostgres(t *testing.T) {
	t.Parallel()
	if !pgtest.Available(t) {
		t.Skip("needs PostgreSQL")
	}
	l := newPostgresLedger(t)
	p := newProcess(t)
	created := p.run("--db", l.name, "-o", "json", "apikey", "create", "--tenant", "acme", "--scopes", "read,write")
	var key struct {
		Token string `json:"token"`
	}
	if created.code != 0 || json.Unmarshal([]byte(created.stdout), &key) != nil || key.Token == "" {
		t.Fatalf("apikey create: %+v", created)
	}
	const (
		servers  = 3
		chains   = 8
		clients  = 64
		requests = 16 // per client
	)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	bases := make([]string, servers)
	for i := range bases {
		// Stopped by SIGTERM at cleanup, after ctx ends.
		s := testbin.Serve(t, p.env, time.Minute, "--db", l.name, "serve", "--addr", "127.0.0.1:0")
		t.Cleanup(func() {
			if err := s.Stop(2 * time.Minute); err != nil {
				t.Errorf("serve %d: %v", i, err)
			}
		})
		bases[i] = s.URL
	}
	post := func(base, chainName, idemKey string) (int, string, error) {
		body := fmt.Sprintf(`{"type":"load/v1","payload":"%s"}`, "eyJuIjoxfQ==")
		r, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/v1/chains/"+chainName+"/entries", strings.NewReader(body))
		if err != nil {
			return 0, "", err
		}
		r.Header.Set("Authorization", "Bearer "+key.Token)
		r.Header.Set("Content-Type", "application/json")
		r.Header.Set("Idempotency-Key", idemKey)
		resp, err := http.DefaultClient.Do(r)
		if err != nil {
			return 0, "", err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b), err
	}
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		want = map[string]uint64{}
	)
	for c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range requests {
				n := c*requests + i
				chainName := fmt.Sprintf("load/%d", n%chains)
				idemKey := fmt.Sprintf("req-%d", n)
				status, first, err := post(bases[n%servers], chainName, idemKey)
				if err != nil || status != http.StatusCreated {
					t.Errorf("request %d: %d %s %v", n, status, first, err)
					continue
				}
				mu.Lock()
				want[chainName]++
				mu.Unlock()
				status, again, err := post(bases[(n+1)%servers], chainName, idemKey)
				if err != nil || status != http.StatusCreated || again != first {
					t.Errorf("retry of request %d on another server: %d %s %v, want 201 %s", n, status, again, err, first)
				}
			}
		}()
	}
	wg.Wait()
	for chainName, n := range want {
		r, err := http.NewRequestWithContext(ctx, http.MethodGet, bases[0]+"/v1/chains/"+chainName+"/head", nil)
		if err != nil {
			t.Fatal(err)
		}
		r.Header.Set("Authorization", "Bearer "+key.Token)
		resp, err := http.DefaultClient.Do(r)
		if err != nil {
			t.Fatal(err)
		}
		var h api.Head
		err = json.NewDecoder(resp.Body).Decode(&h)
		resp.Body.Close()
		if err != nil || h.Seq != n {
			t.Errorf("chain %s: head %+v, %v; want %d entries", chainName, h, err, n)
		}
	}
	if r := p.run("--db", l.name, "verify"); r.code != 0 {
		t.Errorf("verify: %+v", r)
	}
}
