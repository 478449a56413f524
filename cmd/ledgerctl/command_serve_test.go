package main

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// serve prints its address first, answers with a key made by `apikey
// create`, and on cancellation (SIGINT, SIGTERM) stops cleanly, exit 0.
func TestServe(t *testing.T) {
	l := newFileLedger(t)
	l.must("init")
	var key struct{ Token string }
	if err := json.Unmarshal([]byte(l.must("apikey", "create", "--tenant", "acme", "--scopes", "read,write", "-o", "json")), &key); err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(l.dir, "serve.json")
	if err := os.WriteFile(cfg, []byte(`{"providers":[{"name":"gh","kind":"github","tenant":"acme","secrets":["s"]}],"deliveries":[]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	out, w := io.Pipe()
	code := make(chan int, 1)
	go func() {
		code <- execute(ctx, newApp(), []string{"--db", l.name, "serve", "--addr", "127.0.0.1:0", "--config", cfg}, nil, w, io.Discard)
		w.Close()
	}()
	lines := make(chan string, 10)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	first := <-lines
	if !strings.HasPrefix(first, "listening on http://127.0.0.1:") {
		t.Fatalf("first line %q", first)
	}
	base := strings.TrimPrefix(first, "listening on ")
	req, _ := http.NewRequest(http.MethodPost, base+"/v1/chains/c/entries", strings.NewReader(`{"type":"t","payload":"cA=="}`))
	req.Header.Set("Authorization", "Bearer "+key.Token)
	req.Header.Set("Idempotency-Key", "k")
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("append: %d", resp.StatusCode)
	}
	cancel()
	awaitServeExit(t, code)
	if last := <-lines; !strings.HasPrefix(last, "stopped") {
		t.Fatalf("last line %q", last)
	}
	if got := l.must("head", "acme/c", "-o", "json"); !strings.Contains(got, `"seq":1`) {
		t.Fatalf("head after serve: %s", got)
	}
	// A bad flag or configuration exits 2 before anything listens.
	l.run("serve", "--tls-cert", "x").expect(t, exitUsage, "--tls-key")
	l.run("serve", "--idempotency-lease", "0s").expect(t, exitUsage, "the lease")
	l.run("serve", "--idempotency-lease", "2h", "--idempotency-ttl", "1h").expect(t, exitUsage, "--idempotency-lease 2h0m0s: longer than --idempotency-ttl")
	os.WriteFile(filepath.Join(l.dir, "bad.key"), []byte("not a key"), 0o600)
	l.run("serve", "--checkpoint-key", filepath.Join(l.dir, "bad.key")).expect(t, exitUsage, "not a signing key")
	l.run("serve", "--checkpoint-key", filepath.Join(l.dir, "bad.key"), "--checkpoint-interval", "1ms").expect(t, exitUsage, "--checkpoint-interval")
	os.WriteFile(cfg, []byte(`{"providers":[{"name":"gh","kind":"nope","tenant":"acme","secrets":["s"]}]}`), 0o600)
	l.run("serve", "--config", cfg).expect(t, exitUsage, "kind")
	os.WriteFile(cfg, []byte(`{"deliveries":[{"tenant":"acme","topic":"business-events","url":"http://127.0.0.1:9/h",`+
		`"secret":"whsec_MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=","max_age":"-1h"}]}`), 0o600)
	l.run("serve", "--config", cfg).expect(t, exitUsage, "may not be negative")
	// A delivery to loopback needs the allowance; a delivery timeout needs
	// an outbox lease that covers it.
	os.WriteFile(cfg, []byte(`{"deliveries":[{"tenant":"acme","topic":"business-events","url":"http://127.0.0.1:9/h",`+
		`"secret":"whsec_MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY="}]}`), 0o600)
	l.run("serve", "--config", cfg).expect(t, exitUsage, "address refused")
	os.WriteFile(cfg, []byte(`{"deliveries":[{"tenant":"acme","topic":"business-events","url":"http://127.0.0.1:9/h",`+
		`"allow_private_addresses":true,"timeout":"40s","secret":"whsec_MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY="}]}`), 0o600)
	l.run("serve", "--config", cfg, "--outbox-lease", "30s").expect(t, exitUsage, "needs an outbox lease of at least 1m0s")
	os.WriteFile(cfg, []byte(`{"deliveries":[{"tenant":"acme","topic":"business-events","url":"http://127.0.0.1:9/h",`+
		`"allow_private_addresses":true,"timeout":"20h","secret":"whsec_MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY="}]}`), 0o600)
	l.run("serve", "--config", cfg).expect(t, exitUsage, "needs an outbox lease of at least 30h0m0s")
}

// servedMetrics is a `serve` with --metrics-addr and the extra flags,
// running until the test ends: the API's address, the metrics' URL, GET
// of a URL (status and body), and stop, which ends serve and checks it
// exited cleanly.
func servedMetrics(t *testing.T, l *testLedger, extra ...string) (api, metrics string, get func(url string) (int, string), stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	out, w := io.Pipe()
	code := make(chan int, 1)
	args := append([]string{"--db", l.name, "serve", "--addr", "127.0.0.1:0", "--metrics-addr", "127.0.0.1:0"}, extra...)
	go func() {
		code <- execute(ctx, newApp(), args, nil, w, io.Discard)
		w.Close()
	}()
	sc := bufio.NewScanner(out)
	for metrics == "" && sc.Scan() {
		switch line := sc.Text(); {
		case strings.HasPrefix(line, "listening on "):
			api = strings.TrimPrefix(line, "listening on ")
		case strings.HasPrefix(line, "metrics on "):
			metrics = strings.TrimPrefix(line, "metrics on ")
		}
	}
	go io.Copy(io.Discard, out)
	if api == "" || !strings.HasPrefix(metrics, "http://127.0.0.1:") || !strings.HasSuffix(metrics, "/metrics") {
		t.Fatalf("addresses %q and %q", api, metrics)
	}
	get = func(url string) (int, string) {
		resp, err := http.Get(url)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	stop = func() {
		cancel()
		awaitServeExit(t, code)
	}
	return api, metrics, get, stop
}

// awaitServeExit waits for serve, canceled, to exit with success.
func awaitServeExit(t *testing.T, code <-chan int) {
	t.Helper()
	select {
	case c := <-code:
		if c != exitSuccess {
			t.Fatalf("exit %d", c)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("serve did not stop")
	}
}

// --metrics-addr serves GET /metrics on a listener of its own, and the
// API's address does not serve them.
func TestServeMetricsAddr(t *testing.T) {
	l := newFileLedger(t)
	l.must("init")
	api, metrics, get, stop := servedMetrics(t, l)
	if status, body := get(metrics); status != http.StatusOK || !strings.Contains(body, "go_goroutines") {
		t.Fatalf("metrics listener: %d %.200s", status, body)
	}
	if status, body := get(api + "/metrics"); status != http.StatusNotFound || strings.Contains(body, "go_goroutines") {
		t.Fatalf("API address /metrics: %d %.200s", status, body)
	}
	if status, _ := get(strings.TrimSuffix(metrics, "/metrics") + "/debug/pprof/cmdline"); status != http.StatusNotFound {
		t.Fatalf("metrics listener without --pprof: /debug/pprof/cmdline answered %d", status)
	}
	stop()
}

// --pprof serves the runtime's profiles beside the metrics, on their
// listener only, and needs --metrics-addr.
func TestServePprof(t *testing.T) {
	l := newFileLedger(t)
	l.must("init")
	l.run("serve", "--addr", "127.0.0.1:0", "--pprof").expect(t, exitUsage, "give --metrics-addr too")
	api, metrics, get, stop := servedMetrics(t, l, "--pprof")
	base := strings.TrimSuffix(metrics, "/metrics")
	if status, body := get(metrics); status != http.StatusOK || !strings.Contains(body, "go_goroutines") {
		t.Fatalf("metrics with --pprof: %d %.200s", status, body)
	}
	if status, body := get(base + "/debug/pprof/heap?debug=1"); status != http.StatusOK || !strings.Contains(body, "heap profile") {
		t.Fatalf("/debug/pprof/heap: %d %.200s", status, body)
	}
	if status, body := get(base + "/debug/pprof/profile?seconds=1"); status != http.StatusOK || len(body) == 0 {
		t.Fatalf("/debug/pprof/profile: %d, %d bytes", status, len(body))
	}
	if status, _ := get(api + "/debug/pprof/heap"); status == http.StatusOK {
		t.Fatal("the API's address serves the profiles")
	}
	stop()
}
