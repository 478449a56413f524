package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ledgerworks/ledger/api"
	"github.com/ledgerworks/ledger/apikey"
	"github.com/ledgerworks/ledger/chain"
	"github.com/ledgerworks/ledger/decimal"
	"github.com/ledgerworks/ledger/internal/testbin"
	"github.com/ledgerworks/ledger/outbox"
	"github.com/ledgerworks/ledger/server"
	"github.com/ledgerworks/ledger/server/servertest"
	"github.com/ledgerworks/ledger/stockmovement"
)

// serveChild runs `ledgerctl --db path serve` on a free port of 127.0.0.1
// until the test ends.
func serveChild(t *testing.T, path string) *testbin.Served {
	t.Helper()
	return testbin.Serve(t, nil, 30*time.Second, "--db", path, "serve", "--addr", "127.0.0.1:0")
}

// vmHWM is the peak resident set of a process, in bytes (Linux).
func vmHWM(t *testing.T, pid int) int64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Skipf("no /proc: %v", err)
	}
	for line := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return kb << 10
		}
	}
	t.Skip("no VmHWM")
	return 0
}

// peakGrowthMax is what four concurrent readers of the largest pages may
// add to the server's peak resident set: a few of its response bound each
// (a page's entries, their encoding, the read buffers), not the chain.
const peakGrowthMax = 128 << 20

// Reading a chain of large entries, four pages at once, grows the peak
// resident set of `ledgerctl serve` by a bound set by
// server.ResponseSizeMax, not by the chain's size: 40 entries of 750 KB
// (30 MB of payload, 40 MB encoded) read by four clients at limit=1000,
// every page of it, three times over.
func TestLargePagesBoundServerMemory(t *testing.T) {
	if testing.Short() {
		t.Skip("builds ledgerctl and writes 30 MB")
	}
	path := filepath.Join(t.TempDir(), "ledger.db")
	db, err := chain.Open(path, chain.Options{})
	if err != nil {
		t.Fatal(err)
	}
	token := servertest.Key(t, db, "acme", apikey.ScopeRead)
	payload := bytes.Repeat([]byte("0123456789abcdef"), 750_000/16)
	const entries = 40
	for i := range entries {
		if _, err := db.Append(context.Background(), chain.Request{Chain: "acme/big", Type: "blob/v1", Payload: payload,
			IdempotencyKey: "blob-" + strconv.Itoa(i)}); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	child := serveChild(t, path)
	url := child.URL
	get := func(from uint64) (api.EntryPage, error) {
		req, _ := http.NewRequest(http.MethodGet, url+"/v1/chains/big/entries?limit=1000&from="+strconv.FormatUint(from, 10), nil)
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return api.EntryPage{}, err
		}
		defer resp.Body.Close()
		var page api.EntryPage
		if resp.StatusCode != http.StatusOK {
			b, _ := io.ReadAll(resp.Body)
			return page, fmt.Errorf("status %d: %s", resp.StatusCode, b)
		}
		return page, json.NewDecoder(resp.Body).Decode(&page)
	}
	if _, err := get(entries); err != nil { // warm: one entry
		t.Fatal(err)
	}
	base := vmHWM(t, child.Pid())
	for range 3 {
		var wg sync.WaitGroup
		errs := make(chan error, 4)
		for range 4 {
			wg.Go(func() {
				seen := 0
				for from := uint64(1); from != 0; {
					page, err := get(from)
					if err != nil {
						errs <- err
						return
					}
					seen += len(page.Entries)
					from = page.NextSeq
				}
				if seen != entries {
					errs <- fmt.Errorf("read %d entries, want %d", seen, entries)
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
	}
	peak := vmHWM(t, child.Pid())
	t.Logf("VmHWM %d MiB before the reads, %d MiB after (+%d MiB)", base>>20, peak>>20, (peak-base)>>20)
	if peak-base > peakGrowthMax {
		t.Fatalf("the reads grew the server's peak resident set by %d MiB, want at most %d MiB", (peak-base)>>20, peakGrowthMax>>20)
	}
}

// A page of large entries ends before the entry that would take it past
// server.ResponseSizeMax, with next_seq; paging through returns every
// entry exactly once, in order, with its payload; an entry larger than the
// bound comes alone in its page.
func TestEntryPagesEndAtTheByteBound(t *testing.T) {
	db, err := chain.Open(filepath.Join(t.TempDir(), "ledger.db"), chain.Options{PayloadSizeMax: 2 * server.ResponseSizeMax})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	ts := startServer(t, db, server.Options{})
	token := ts.key("acme", apikey.ScopeRead)
	var payloads [][]byte
	for i := range 14 {
		size := 1_000_000
		if i == 9 {
			size = server.ResponseSizeMax + 1 // alone in its page
		}
		p := bytes.Repeat([]byte{byte('a' + i)}, size)
		payloads = append(payloads, p)
		if _, err := db.Append(context.Background(), chain.Request{Chain: "acme/big", Type: "blob/v1", Payload: p}); err != nil {
			t.Fatal(err)
		}
	}
	var seqs []uint64
	pages := 0
	for from := uint64(1); from != 0; pages++ {
		r := ts.do(http.MethodGet, "/v1/chains/big/entries?limit=1000&from="+strconv.FormatUint(from, 10), token, "", nil)
		var page api.EntryPage
		r.decode(t, http.StatusOK, &page)
		if len(page.Entries) == 0 {
			t.Fatalf("from=%d: an empty page with next_seq %d", from, page.NextSeq)
		}
		if len(page.Entries) > 1 && len(r.body) > server.ResponseSizeMax {
			t.Fatalf("from=%d: %d entries in %d bytes, over the bound %d", from, len(page.Entries), len(r.body), server.ResponseSizeMax)
		}
		for _, e := range page.Entries {
			if e.Seq == 10 && len(page.Entries) != 1 {
				t.Fatalf("the entry larger than the bound shares its page with %d others", len(page.Entries)-1)
			}
			if !bytes.Equal(e.Payload, payloads[e.Seq-1]) {
				t.Fatalf("seq %d: payload differs", e.Seq)
			}
			seqs = append(seqs, e.Seq)
		}
		if last := page.Entries[len(page.Entries)-1].Seq; page.NextSeq != 0 && page.NextSeq != last+1 {
			t.Fatalf("from=%d: next_seq %d after seq %d", from, page.NextSeq, last)
		}
		from = page.NextSeq
	}
	for i, seq := range seqs {
		if seq != uint64(i+1) {
			t.Fatalf("paging returned seqs %v, want 1 to 14 once each", seqs)
		}
	}
	if len(seqs) != 14 || pages < 5 {
		t.Fatalf("%d entries in %d pages, want 14 in at least 5 (3 of 1 MB a page)", len(seqs), pages)
	}
}

// The dead letters come a page at a time: a page ends before the letter
// that would take it past server.ResponseSizeMax, with next_from, and
// paging through returns every dead letter exactly once.
func TestDeadLetterPagesEndAtTheByteBound(t *testing.T) {
	db := openBolt(t)
	const letters = 40
	payload := bytes.Repeat([]byte("p"), outbox.PayloadSizeMax)
	for i := range letters {
		if _, err := outbox.Enqueue(context.Background(), db, outbox.EnqueueRequest{Tenant: "acme", Topic: api.TopicDefault,
			IdempotencyKey: "dead-" + strconv.Itoa(i), Payload: payload}); err != nil {
			t.Fatal(err)
		}
	}
	_, url := newReceiver(t, func(n int) int { return http.StatusBadRequest }) // permanent: dead at once
	ts := startServer(t, db, server.Options{Deliveries: []server.Delivery{{Tenant: "acme", Topic: api.TopicDefault, URL: url, Secret: whsec, AllowPrivateAddresses: true}}})
	token := ts.key("acme", allScopes...)
	var stats api.OutboxStats
	for deadline := time.Now().Add(30 * time.Second); len(stats.Topics) == 0 || stats.Topics[0].Dead < letters; {
		if time.Now().After(deadline) {
			t.Fatalf("not every message is dead: %+v", stats)
		}
		time.Sleep(50 * time.Millisecond)
		ts.do(http.MethodGet, "/v1/outbox/stats", token, "", nil).decode(t, http.StatusOK, &stats)
	}
	seen := map[string]bool{}
	pages := 0
	for from, more := "", true; more; pages++ {
		path := "/v1/outbox/dead"
		if from != "" {
			path += "?from=" + from
		}
		r := ts.do(http.MethodGet, path, token, "", nil)
		var page api.OutboxMessageList
		r.decode(t, http.StatusOK, &page)
		if len(page.Messages) == 0 || len(page.Messages) > 1 && len(r.body) > server.ResponseSizeMax {
			t.Fatalf("page %d: %d letters in %d bytes", pages, len(page.Messages), len(r.body))
		}
		for _, m := range page.Messages {
			if seen[m.ID] || m.Status != "dead" || m.Payload == "" {
				t.Fatalf("page %d: %s (%s) again or without its payload", pages, m.ID, m.Status)
			}
			seen[m.ID] = true
		}
		from, more = page.NextFrom, page.NextFrom != ""
	}
	if len(seen) != letters || pages < 3 {
		t.Fatalf("%d dead letters in %d pages, want %d in at least 3", len(seen), pages, letters)
	}
	ts.do(http.MethodGet, "/v1/outbox/dead?from=nothex", token, "", nil).wantProblem(t, http.StatusBadRequest, api.CodeInvalidInput)
}

// A page of the stock history ends before the movement that would take it
// past server.ResponseSizeMax, with next_seq; paging through returns every
// movement exactly once, in order.
func TestStockHistoryPagesEndAtTheByteBound(t *testing.T) {
	db := openBolt(t)
	ts := startServer(t, db, server.Options{})
	token := ts.key("acme", allScopes...)
	fixture(t, ts, token) // SKU-1 at WH-1, and a purchase receipt there
	note := strings.Repeat("n", stockmovement.NoteLengthMax)
	const movements = 3500 // about 1.3 KB each: more than a page's bound
	for batch := 0; batch < movements; batch += 500 {
		err := db.Update(context.Background(), func(tx *chain.Tx) error {
			for i := batch; i < batch+500; i++ {
				if _, err := stockmovement.ReceiveTx(tx, stockmovement.ReceiveRequest{Tenant: "acme", Item: "SKU-1", Location: "WH-1",
					Quantity: decimal.MustNew(1, 0), Note: note, IdempotencyKey: "history-" + strconv.Itoa(i)}); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	var seqs []uint64
	pages := 0
	for from := uint64(1); from != 0; pages++ {
		r := ts.do(http.MethodGet, "/v1/stock/history/SKU-1/WH-1?limit=10000&from="+strconv.FormatUint(from, 10), token, "", nil)
		var page api.StockHistory
		r.decode(t, http.StatusOK, &page)
		if len(page.Entries) == 0 || len(r.body) > server.ResponseSizeMax {
			t.Fatalf("from=%d: %d movements in %d bytes", from, len(page.Entries), len(r.body))
		}
		for _, e := range page.Entries {
			seqs = append(seqs, e.Seq)
		}
		from = page.NextSeq
	}
	for i, seq := range seqs {
		if seq != uint64(i+1) {
			t.Fatalf("movement %d has seq %d: every movement once, in order, wanted", i, seq)
		}
	}
	if len(seqs) != movements+1 || pages < 2 {
		t.Fatalf("%d movements in %d pages, want %d in at least 2", len(seqs), pages, movements+1)
	}
}
