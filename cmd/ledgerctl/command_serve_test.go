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
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("append: %d", resp.StatusCode)
	}
	cancel()
	select {
	case c := <-code:
		if c != exitSuccess {
			t.Fatalf("exit %d", c)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("serve did not stop")
	}
	if last := <-lines; !strings.HasPrefix(last, "stopped") {
		t.Fatalf("last line %q", last)
	}
	if got := l.must("head", "acme/c", "-o", "json"); !strings.Contains(got, `"seq":1`) {
		t.Fatalf("head after serve: %s", got)
	}
	// A bad flag or configuration exits 2 before anything listens.
	l.run("serve", "--tls-cert", "x").expect(t, exitUsage, "--tls-key")
	os.WriteFile(filepath.Join(l.dir, "bad.key"), []byte("not a key"), 0o600)
	l.run("serve", "--checkpoint-key", filepath.Join(l.dir, "bad.key")).expect(t, exitUsage, "not a signing key")
	l.run("serve", "--checkpoint-key", filepath.Join(l.dir, "bad.key"), "--checkpoint-interval", "1ms").expect(t, exitUsage, "--checkpoint-interval")
	os.WriteFile(cfg, []byte(`{"providers":[{"name":"gh","kind":"nope","tenant":"acme","secrets":["s"]}]}`), 0o600)
	l.run("serve", "--config", cfg).expect(t, exitUsage, "kind")
	os.WriteFile(cfg, []byte(`{"deliveries":[{"tenant":"acme","topic":"business-events","url":"http://127.0.0.1:9/h",`+
		`"secret":"whsec_MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=","max_age":"-1h"}]}`), 0o600)
	l.run("serve", "--config", cfg).expect(t, exitUsage, "may not be negative")
}
