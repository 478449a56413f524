package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"

	"github.com/ledgerworks/ledger/console"
	"github.com/ledgerworks/ledger/outbox/signature"
)

// chromiumPath is Debian's Chromium, which the browser tests drive.
const chromiumPath = "/usr/bin/chromium"

// screenshotsEnv names the variable that makes the browser tests rewrite
// the console's screenshots under docs/console.
const screenshotsEnv = "LEDGER_CONSOLE_SCREENSHOTS"

// consoleServer is a ledgerctl serve run in process for the browser tests,
// reached through a proxy the tests can cut (the network lost) and with a
// hook that holds a request in the server (a reload while it runs).
type consoleServer struct {
	t      *testing.T // the running (sub)test
	top    *testing.T // the test whose cleanup stops the server
	l      *testLedger
	config string
	flags  []string // more flags of serve
	addr   string   // the server's address, the same across restarts
	stop   func()
	api    string // the server's base URL, for the test's own requests

	// The proxy the browser talks to: its origin is the console's.
	proxy *httptest.Server
	// lossy: while set, the proxy forwards each POST to the server and
	// then drops the connection instead of answering (the answer lost).
	lossy atomic.Bool

	mu sync.Mutex
	// hold: the next request of holdRoute waits in the server, inside
	// the replay guard, until released; the POSTs to holdPath are
	// recorded.
	holdRoute, holdPath string
	statuses            []int         // their answers' statuses
	held                chan string   // the held request's Idempotency-Key
	release             chan struct{} // closed to let it run
	keys                []string      // Idempotency-Keys of the POSTs to holdPath
}

func startConsoleServer(t *testing.T, l *testLedger, config string, flags ...string) *consoleServer {
	cs := &consoleServer{t: t, top: t, l: l, config: config, addr: "127.0.0.1:0", flags: flags}
	cs.start()
	target, _ := url.Parse(cs.api)
	rp := httputil.NewSingleHostReverseProxy(target)
	cs.proxy = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost && cs.lossy.Load() {
			rec := httptest.NewRecorder()
			rp.ServeHTTP(rec, r)
			conn, _, err := w.(http.Hijacker).Hijack()
			if err == nil {
				conn.Close()
			}
			return
		}
		rp.ServeHTTP(w, r)
	}))
	t.Cleanup(cs.proxy.Close)
	return cs
}

// start runs serve on cs.addr and waits for its first line.
func (cs *consoleServer) start() {
	t := cs.t
	ctx, cancel := context.WithCancel(context.Background())
	a := newApp()
	a.serveWrap, a.serveRouteHook = cs.wrap, cs.routeHook
	out, w := io.Pipe()
	done := make(chan int, 1)
	go func() {
		args := append([]string{"--db", cs.l.name, "serve", "--addr", cs.addr, "--config", cs.config}, cs.flags...)
		done <- execute(ctx, a, args, nil, w, io.Discard)
		w.Close()
	}()
	sc := bufio.NewScanner(out)
	if !sc.Scan() || !strings.HasPrefix(sc.Text(), "listening on ") {
		cancel()
		t.Fatalf("serve did not start: %q (exit %d)", sc.Text(), <-done)
	}
	cs.api = strings.TrimPrefix(sc.Text(), "listening on ")
	cs.addr = strings.TrimPrefix(cs.api, "http://")
	go io.Copy(io.Discard, out) //nolint:errcheck // drains the last line
	stopped := false
	cs.stop = func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		select {
		case code := <-done:
			if code != exitSuccess {
				cs.t.Errorf("serve exited %d", code)
			}
		case <-time.After(30 * time.Second):
			cs.t.Error("serve did not stop")
		}
	}
	cs.top.Cleanup(cs.stop)
}

// wrap is serve's outer test hook: it records the key and the answer's
// status of every POST to holdPath.
func (cs *consoleServer) wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		cs.mu.Lock()
		watched := r.Method == http.MethodPost && r.URL.Path == cs.holdPath
		cs.mu.Unlock()
		if !watched {
			next.ServeHTTP(w, r)
			return
		}
		sw := &statusRecorder{ResponseWriter: w}
		next.ServeHTTP(sw, r)
		cs.mu.Lock()
		cs.keys = append(cs.keys, r.Header.Get("Idempotency-Key"))
		cs.statuses = append(cs.statuses, sw.status)
		cs.mu.Unlock()
	})
}

// routeHook is serve's inner test hook (server.Options.RouteHook): inside
// the replay guard, it holds the first request of the route holdRoute
// until release is closed, so that a retry finds it in progress. The held
// request runs on without its client's cancellation, as a request whose
// client went away does.
func (cs *consoleServer) routeHook(routeID string, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		cs.mu.Lock()
		var held chan string
		var release chan struct{}
		if routeID == cs.holdRoute && cs.held != nil {
			held, release, cs.held = cs.held, cs.release, nil
		}
		cs.mu.Unlock()
		if held != nil {
			held <- r.Header.Get("Idempotency-Key")
			<-release
			r = r.WithContext(context.WithoutCancel(r.Context()))
		}
		next.ServeHTTP(w, r)
	})
}

// statusRecorder keeps the status a handler writes.
type statusRecorder struct {
	http.ResponseWriter
	status int
}

func (s *statusRecorder) WriteHeader(code int) {
	if s.status == 0 {
		s.status = code
	}
	s.ResponseWriter.WriteHeader(code)
}

// do sends one request to the server as the test (not the browser).
func (cs *consoleServer) do(method, path, token, body string) (int, []byte) {
	cs.t.Helper()
	req, err := http.NewRequest(method, cs.api+path, strings.NewReader(body))
	if err != nil {
		cs.t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if method != http.MethodGet {
		req.Header.Set("Idempotency-Key", fmt.Sprintf("test-%d", time.Now().UnixNano()))
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		cs.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

func (cs *consoleServer) must(method, path, token, body string) []byte {
	cs.t.Helper()
	code, b := cs.do(method, path, token, body)
	if code >= 300 {
		cs.t.Fatalf("%s %s: %d %s", method, path, code, b)
	}
	return b
}

// historyLen counts the stock movements of an item at a location.
func (cs *consoleServer) historyLen(token, item, location string) int {
	cs.t.Helper()
	var h struct{ Entries []json.RawMessage }
	if err := json.Unmarshal(cs.must("GET", "/v1/stock/history/"+item+"/"+location+"?limit=100", token, ""), &h); err != nil {
		cs.t.Fatal(err)
	}
	return len(h.Entries)
}

// browser is one headless Chromium shared by the subtests, one tab.
type browser struct {
	t       *testing.T
	ctx     context.Context
	base    string
	dialogs atomic.Int32
	shots   string // where screenshots go; "" to take none
}

func newBrowser(t *testing.T, base string) *browser {
	b := &browser{t: t, base: base}
	if os.Getenv(screenshotsEnv) != "" {
		b.shots = filepath.Join("..", "..", "docs", "console")
	}
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(chromiumPath), chromedp.UserDataDir(t.TempDir()), chromedp.WindowSize(1280, 900),
		chromedp.Flag("headless", true), chromedp.Flag("no-sandbox", true), chromedp.Flag("disable-gpu", true),
		chromedp.Flag("disable-quic", true), chromedp.Flag("no-first-run", true),
		chromedp.Flag("disable-background-networking", true), chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true), chromedp.Flag("hide-scrollbars", true),
	}
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(actx, chromedp.WithListener(func(ev any) {
		if _, ok := ev.(*page.EventJavascriptDialogOpening); ok {
			b.dialogs.Add(1)
		}
	}))
	b.ctx = ctx
	t.Cleanup(func() { cancel(); cancelAlloc() })
	// The first run starts the browser on ctx itself: a browser started
	// on a context with a timeout would close when that one ends.
	if err := chromedp.Do(ctx); err != nil {
		t.Fatal(err)
	}
	return b
}

func (b *browser) do(steps ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 90*time.Second)
	defer cancel()
	if err := chromedp.Do(ctx, steps...); err != nil {
		b.t.Fatal(err)
	}
}

// eval evaluates a JavaScript expression in the page.
func eval[T any](b *browser, expr string) T {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 60*time.Second)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](expr, chromedp.EvalAwaitPromise))
	if err != nil {
		b.t.Fatalf("%s: %v", expr, err)
	}
	return v
}

// wait polls a JavaScript predicate until it holds. An evaluation that
// fails (the page is between two documents) is tried again.
func (b *browser) wait(expr string) {
	b.t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	var err error
	for time.Now().Before(deadline) {
		ctx, cancel := context.WithTimeout(b.ctx, 10*time.Second)
		var ok bool
		ok, err = chromedp.Run(ctx, chromedp.Evaluate[bool]("!!("+expr+")"))
		cancel()
		if err == nil && ok {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	text, _ := chromedp.Run(b.ctx, chromedp.Evaluate[string](`document.getElementById("main")?.innerText ?? ""`))
	b.t.Fatalf("waiting for %s (last error %v); the page shows:\n%s", expr, err, text)
}

func (b *browser) goTo(hash string) {
	b.t.Helper()
	// A new document each time, not a jump within the current one.
	b.do(chromedp.Navigate("about:blank"), chromedp.Navigate(b.base+console.Prefix+hash))
}

// screenshot saves the viewport as docs/console/<name>.png when asked to.
func (b *browser) screenshot(name string) {
	b.t.Helper()
	if b.shots == "" {
		return
	}
	png, err := chromedp.Run(b.ctx, chromedp.CaptureScreenshot())
	if err != nil {
		b.t.Fatal(err)
	}
	if err := os.MkdirAll(b.shots, 0o755); err != nil {
		b.t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(b.shots, name+".png"), png, 0o644); err != nil {
		b.t.Fatal(err)
	}
}

func (b *browser) signIn(token string) {
	b.t.Helper()
	b.goTo("")
	b.wait(`document.getElementById("signin") || document.getElementById("tenant")`)
	if eval[bool](b, `!!document.getElementById("tenant")`) {
		b.do(chromedp.Click(chromedp.CSS("#signout")))
		b.wait(`document.getElementById("signin")`)
	}
	b.do(chromedp.SetValue(chromedp.CSS("#token"), token), chromedp.Click(chromedp.CSS("#signin-submit")))
	b.wait(`document.getElementById("tenant")?.textContent === "acme"`)
}

// fill sets the named fields of a form.
func (b *browser) fill(form string, fields map[string]string) {
	b.t.Helper()
	for name, v := range fields {
		b.do(chromedp.SetValue(chromedp.CSS(fmt.Sprintf(`#%s [name=%q]`, form, name)), v))
	}
}

// The console in a real browser against a real ledgerctl serve: every
// page, the intents of its forms under double clicks, reloads and lost
// answers, a dead letter requeued and delivered, a read key, hostile
// names and payloads, and a tampered ledger.
func TestConsoleBrowser(t *testing.T) {
	if _, err := os.Stat(chromiumPath); err != nil {
		t.Skipf("the console's browser tests need Chromium at %s (apt-get install -y chromium): %v", chromiumPath, err)
	}
	if testing.Short() {
		t.Skip("the console's browser tests start Chromium; skipped with -short")
	}
	l := newFileLedger(t)
	l.must("init")
	token := func(scopes string) string {
		var key struct{ Token string }
		if err := json.Unmarshal([]byte(l.must("apikey", "create", "--tenant", "acme", "--name", "console-"+strings.ReplaceAll(scopes, ",", "-"),
			"--scopes", scopes, "-o", "json")), &key); err != nil {
			t.Fatal(err)
		}
		return key.Token
	}
	admin, reader := token("read,write,admin"), token("read")

	// The webhook receiver refuses (400: a dead letter at once) until told
	// to accept.
	var accept atomic.Bool
	var delivered atomic.Int32
	receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !accept.Load() {
			http.Error(w, "no such purchase order", http.StatusBadRequest)
			return
		}
		delivered.Add(1)
		w.WriteHeader(http.StatusNoContent)
	}))
	defer receiver.Close()
	config := filepath.Join(l.dir, "serve.json")
	secret := "whsec_" + base64.StdEncoding.EncodeToString([]byte("console-test-secret-32-bytes-long"))
	if err := os.WriteFile(config, []byte(fmt.Sprintf(`{"deliveries":[{"tenant":"acme","topic":"business-events","url":%q,"secret":%q}],`+
		`"providers":[{"name":"carrier","kind":"github","tenant":"acme","secrets":["carrier-secret"]}]}`,
		receiver.URL+"/hooks/ledger", secret)), 0o600); err != nil {
		t.Fatal(err)
	}
	signer, pub := filepath.Join(l.dir, "checkpoint.key"), filepath.Join(l.dir, "checkpoint.pub")
	l.must("keygen", "console.test/ledger", "--key", signer, "--pub", pub)
	cs := startConsoleServer(t, l, config, "--checkpoint-key", signer, "--checkpoint-interval", "200ms")
	seedConsole(cs, admin)
	b := newBrowser(t, cs.proxy.URL)
	run := func(name string, fn func(t *testing.T)) {
		t.Run(name, func(t *testing.T) {
			b.t, cs.t = t, t
			fn(t)
		})
	}

	run("headers", func(t *testing.T) {
		resp, err := http.Get(cs.proxy.URL + console.Prefix)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if got := resp.Header.Get("Content-Security-Policy"); got != console.ContentSecurityPolicy || !strings.HasPrefix(got, "default-src 'self'") {
			t.Fatalf("Content-Security-Policy %q", got)
		}
		if resp.Header.Get("X-Content-Type-Options") != "nosniff" || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/html") {
			t.Fatalf("headers %v", resp.Header)
		}
	})

	run("sign in and browse", func(t *testing.T) {
		b.goTo("")
		b.wait(`document.getElementById("signin")`)
		b.screenshot("signin")
		b.signIn(admin)
		if stored := eval[string](b, `sessionStorage.getItem("ledger.console.token")`); stored != admin {
			t.Fatal("the token is not in sessionStorage")
		}
		if n := eval[int](b, `localStorage.length`); n != 0 || strings.Contains(eval[string](b, `location.href`), admin) {
			t.Fatal("the token leaked to localStorage or the URL")
		}
		b.wait(`document.querySelector('[data-chain="orders/2026"]')`)
		b.screenshot("chains")
		b.do(chromedp.Click(chromedp.CSS(`[data-chain="orders/2026"] a`)))
		b.wait(`document.querySelector('tr[data-seq="3"] pre[data-json]')`)
		if got := eval[string](b, `document.querySelector('tr[data-seq="3"] pre').textContent`); !strings.Contains(got, `"total": "1250.00"`) {
			t.Fatalf("payload shown as %q", got)
		}
		if got := eval[string](b, `document.querySelector('tr[data-seq="2"] a').getAttribute("href")`); !strings.Contains(got, "seq=1") {
			t.Fatalf("link to the predecessor %q", got)
		}
		// The entry's proof and its checkpoint, once a checkpoint holds it
		// (one is signed every 200ms while the ledger changes).
		for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(250 * time.Millisecond) {
			b.do(chromedp.Click(chromedp.CSS(`[data-proof="2"]`)))
			b.wait(`document.querySelector('[data-proof-status="2"]').textContent.length > 3`)
			if eval[bool](b, `document.querySelector('[data-proof-status="2"]').dataset.ok === "1"`) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("no proof: %s", eval[string](b, `document.querySelector('[data-proof-status="2"]').textContent`))
			}
		}
		if got := eval[string](b, `document.querySelector('[data-proof-status="2"]').textContent`); !strings.Contains(got, "console.test/ledger") {
			t.Fatalf("proof status %q", got)
		}
		b.screenshot("chain")
		b.goTo("#/chains?prefix=orders%2F")
		b.wait(`document.querySelectorAll('[data-chain]').length === 1`)
	})

	run("script stays inert", func(t *testing.T) {
		b.goTo("#/chains?prefix=x")
		b.wait(`document.querySelector('[data-chain]')`)
		name := eval[string](b, `document.querySelector('[data-chain] a').textContent`)
		if !strings.Contains(name, "<script>") {
			t.Fatalf("chain name shown as %q", name)
		}
		b.do(chromedp.Click(chromedp.CSS(`[data-chain] a`)))
		b.wait(`document.querySelector('tr[data-seq="1"]')`)
		if got := eval[string](b, `document.querySelector('tr[data-seq="1"] pre').textContent`); !strings.Contains(got, "<img src=x onerror=") {
			t.Fatalf("payload shown as %q", got)
		}
		if eval[bool](b, `window.__pwned !== undefined || document.querySelector("main script, main img") !== null`) || b.dialogs.Load() != 0 {
			t.Fatal("a script from a chain name or payload ran")
		}
	})

	run("double click writes once", func(t *testing.T) {
		before := cs.historyLen(admin, "SKU-1", "WH-1")
		b.goTo("#/forms")
		b.wait(`document.getElementById("purchase-receipt")`)
		b.fill("purchase-receipt", map[string]string{"reference": "po-4711", "quantity": "10"})
		b.do(chromedp.DoubleClick(chromedp.CSS("#pr-submit")))
		b.wait(`document.getElementById("pr-status").dataset.done === "1"`)
		b.screenshot("forms")
		if got := cs.historyLen(admin, "SKU-1", "WH-1"); got != before+1 {
			t.Fatalf("%d movements after a double click, want %d", got, before+1)
		}
		// And a submit's intent shared by two clicks the button did not stop.
		before = cs.historyLen(admin, "SKU-1", "WH-2")
		b.fill("stock-receipt", map[string]string{"location": "WH-2", "quantity": "3"})
		eval[bool](b, `(() => { const f = document.getElementById("stock-receipt"); f.requestSubmit(); f.requestSubmit(); return true; })()`)
		b.wait(`document.getElementById("sr-status").dataset.done === "1"`)
		if got := cs.historyLen(admin, "SKU-1", "WH-2"); got != before+1 {
			t.Fatalf("%d movements after two submits, want %d", got, before+1)
		}
	})

	run("reload while the server holds the request", func(t *testing.T) {
		before := cs.historyLen(admin, "SKU-1", "WH-3")
		cs.mu.Lock()
		cs.holdRoute, cs.holdPath, cs.keys, cs.statuses = "stock.receipts.create", "/v1/stock/receipts", nil, nil
		cs.held, cs.release = make(chan string, 1), make(chan struct{})
		held, release := cs.held, cs.release
		cs.mu.Unlock()
		var once sync.Once
		releaseOnce := func() { once.Do(func() { close(release) }) }
		defer releaseOnce() // a failed test must not leave the server holding it
		b.goTo("#/forms")
		b.wait(`document.getElementById("stock-receipt")`)
		b.fill("stock-receipt", map[string]string{"location": "WH-3", "quantity": "5"})
		b.do(chromedp.Click(chromedp.CSS("#sr-submit")))
		var key string
		select {
		case key = <-held:
		case <-time.After(30 * time.Second):
			t.Fatal("the submit did not reach the server")
		}
		b.do(chromedp.Reload())
		// The reloaded page finds the stored intent and sends it again: the
		// guard answers that the first attempt still runs.
		deadline := time.Now().Add(30 * time.Second)
		for {
			cs.mu.Lock()
			n := len(cs.keys) // answered: the held request is not, yet
			cs.mu.Unlock()
			if n >= 1 || time.Now().After(deadline) {
				break
			}
			time.Sleep(50 * time.Millisecond)
		}
		releaseOnce()
		b.wait(`document.getElementById("sr-status").dataset.done === "1"`)
		cs.mu.Lock()
		keys, statuses := append([]string(nil), cs.keys...), append([]int(nil), cs.statuses...)
		cs.holdRoute, cs.holdPath = "", ""
		cs.mu.Unlock()
		if len(keys) < 2 || !slices.Contains(statuses, http.StatusConflict) {
			t.Fatalf("statuses %v: want the reloaded page's retries, one answered 409 REQUEST_IN_PROGRESS", statuses)
		}
		for _, k := range keys {
			if k != key {
				t.Fatalf("keys %q: the retry changed key", keys)
			}
		}
		if got := cs.historyLen(admin, "SKU-1", "WH-3"); got != before+1 {
			t.Fatalf("%d movements after a reload, want %d", got, before+1)
		}
	})

	run("network lost then back", func(t *testing.T) {
		before := cs.historyLen(admin, "SKU-1", "WH-4")
		b.goTo("#/forms")
		b.wait(`document.getElementById("stock-receipt")`)
		b.fill("stock-receipt", map[string]string{"location": "WH-4", "quantity": "2"})
		cs.lossy.Store(true)
		b.do(chromedp.Click(chromedp.CSS("#sr-submit")))
		b.wait(`document.getElementById("sr-status").dataset.pending === "1"`)
		cs.lossy.Store(false)
		b.do(chromedp.Click(chromedp.CSS(`[data-resend="console.stock-receipt"]`)))
		b.wait(`document.getElementById("sr-status").dataset.done === "1"`)
		if got := eval[string](b, `document.getElementById("sr-status").textContent`); !strings.Contains(got, "nothing was written twice") {
			t.Fatalf("status %q: want the replay shown", got)
		}
		if got := cs.historyLen(admin, "SKU-1", "WH-4"); got != before+1 {
			t.Fatalf("%d movements after the network came back, want %d", got, before+1)
		}
	})

	run("dead letter requeued and delivered", func(t *testing.T) {
		var id string
		deadline := time.Now().Add(60 * time.Second)
		for id == "" {
			var dead struct{ Messages []struct{ ID string } }
			json.Unmarshal(cs.must("GET", "/v1/outbox/dead?topic=business-events", admin, ""), &dead) //nolint:errcheck // retried below
			if len(dead.Messages) > 0 {
				id = dead.Messages[0].ID
			} else if time.Now().After(deadline) {
				t.Fatal("the receipt's message did not become a dead letter")
			} else {
				time.Sleep(100 * time.Millisecond)
			}
		}
		b.goTo("#/message?id=" + id)
		b.wait(`document.querySelector('#timeline [data-event="dead"]')`)
		accept.Store(true)
		b.goTo("#/outbox?topic=business-events")
		b.wait(fmt.Sprintf(`document.querySelector('[data-dead=%q]')`, id))
		b.screenshot("outbox")
		b.do(chromedp.Click(chromedp.CSS(fmt.Sprintf(`[data-dead=%q]`, id))), chromedp.Click(chromedp.CSS("#requeue")))
		b.wait(`document.getElementById("requeue-confirm")`)
		b.do(chromedp.Click(chromedp.CSS("#requeue-confirm")))
		b.wait(`document.getElementById("requeue-status").className.includes("ok")`)
		for deadline = time.Now().Add(60 * time.Second); ; time.Sleep(100 * time.Millisecond) {
			if bytes.Contains(cs.must("GET", "/v1/outbox/messages/"+id, admin, ""), []byte(`"status":"done"`)) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatal("the requeued message was not delivered")
			}
		}
		if delivered.Load() != 1 {
			t.Fatalf("%d deliveries", delivered.Load())
		}
		// The chart counts the rejected attempt and the delivery.
		b.goTo("#/outbox?topic=business-events")
		b.wait(`(() => { const c = document.querySelector('[data-chart="business-events"]'); if (!c) return false;
			const sum = (a) => [...c.querySelectorAll("[" + a + "]")].reduce((n, r) => n + Number(r.getAttribute(a)), 0);
			return sum("data-delivered") === 1 && sum("data-failed") >= 1; })()`)
		b.goTo("#/message?id=" + id)
		b.wait(`document.querySelector('#timeline [data-event="requeue"]') && document.querySelector('#timeline li.ok')`)
		b.screenshot("message")
	})

	run("inbox and replay guard", func(t *testing.T) {
		body := `{"shipment":"SH-77","status":"delivered"}`
		for range 2 {
			req, _ := http.NewRequest(http.MethodPost, cs.api+"/v1/webhooks/carrier", strings.NewReader(body))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("X-GitHub-Delivery", "evt-1001")
			req.Header.Set("X-Hub-Signature-256", signature.SignGitHub([]byte("carrier-secret"), []byte(body)))
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
		}
		b.goTo("#/inbox")
		b.wait(`document.querySelector('[data-provider="carrier"] [data-duplicates]')?.textContent === "1"`)
		b.wait(`document.querySelector('[data-event-id="evt-1001"]')`)
		b.screenshot("inbox")
		// The double-clicked receipt's record: one attempt, its answer stored.
		b.goTo("#/forms")
		b.wait(`document.getElementById("stock-receipt")`)
		b.fill("stock-receipt", map[string]string{"location": "WH-1", "quantity": "1", "reference": "grn-88"})
		b.do(chromedp.Click(chromedp.CSS("#sr-submit")))
		b.wait(`document.getElementById("sr-status").dataset.done === "1"`)
		b.do(chromedp.Click(chromedp.CSS(`#sr-status a`)))
		b.wait(`document.getElementById("guard-status")`)
		if got := eval[string](b, `document.getElementById("guard-status").textContent + "/" + document.getElementById("guard-attempt").textContent`); got != "SUCCESS/1" {
			t.Fatalf("guard record %q", got)
		}
		b.screenshot("guard")
	})

	run("api keys", func(t *testing.T) {
		b.goTo("#/keys")
		b.wait(`document.getElementById("key-create")`)
		if got := eval[string](b, `[...document.querySelectorAll("[data-new-scope]")].map((c) => c.value).join(",")`); got != "read,write,admin" {
			t.Fatalf("scopes offered %q", got)
		}
		b.do(chromedp.SetValue(chromedp.CSS("#key-name"), "auditor"), chromedp.Click(chromedp.CSS(`#key-create button[type=submit]`)))
		b.wait(`document.getElementById("new-token")`)
		if tok := eval[string](b, `document.getElementById("new-token").textContent`); !strings.HasPrefix(tok, "lwk_") {
			t.Fatalf("token %q", tok)
		}
		b.goTo("#/keys")
		b.wait(`document.querySelector("[data-revoke]")`)
		b.screenshot("keys")
		id := eval[string](b, `[...document.querySelectorAll("tr[data-key]")].find((r) => r.textContent.includes("auditor")).dataset.key`)
		b.do(chromedp.Click(chromedp.CSS(fmt.Sprintf(`[data-revoke=%q]`, id))))
		b.do(chromedp.SetValue(chromedp.CSS(fmt.Sprintf(`[data-revoke-reason=%q]`, id)), "audit finished"),
			chromedp.Click(chromedp.CSS(fmt.Sprintf(`[data-revoke-confirm=%q]`, id))))
		b.wait(fmt.Sprintf(`document.querySelector('tr[data-key=%q] .tag.bad')?.textContent.startsWith("revoked")`, id))
	})

	run("read key", func(t *testing.T) {
		b.signIn(reader)
		for _, hash := range []string{"#/chains", "#/forms", "#/outbox", "#/keys", "#/chain?name=orders%2F2026"} {
			b.goTo(hash)
			b.wait(`document.querySelector("main h1")`)
			if n := eval[int](b, `document.querySelectorAll("[data-write], form#purchase-receipt, form#stock-receipt").length`); n != 0 {
				t.Fatalf("%s: %d write controls for a read key", hash, n)
			}
		}
		if got := eval[string](b, `[...document.querySelectorAll("[data-page]")].map((a) => a.dataset.page).join(",")`); got != "chains" {
			t.Fatalf("pages offered to a read key: %q", got)
		}
		status := eval[int](b, `fetch("/v1/chains/orders/2026/entries", {method: "POST", headers: {"Authorization": "Bearer " +
			sessionStorage.getItem("ledger.console.token"), "Idempotency-Key": "forged-1", "Content-Type": "application/json"},
			body: JSON.stringify({type: "forged/v1", payload: "e30="})}).then((r) => r.status)`)
		if status != http.StatusForbidden {
			t.Fatalf("a forged write answered %d", status)
		}
		var head struct{ Seq string }
		json.Unmarshal(cs.must("GET", "/v1/chains/orders/2026/head", admin, ""), &head) //nolint:errcheck // checked below
		if head.Seq != "3" {
			t.Fatalf("head seq %q after a refused write", head.Seq)
		}
	})

	run("verify names a tampered chain's seq and reason", func(t *testing.T) {
		b.signIn(admin)
		b.goTo("#/verify")
		b.do(chromedp.Click(chromedp.CSS("#verify-run")))
		b.wait(`document.getElementById("verify-summary")?.className.includes("ok")`)
		cs.stop()
		flipPayloadByte(t, l.name, "acme/orders/2026", 2)
		cs.start()
		b.goTo("#/verify")
		b.do(chromedp.Click(chromedp.CSS("#verify-run")))
		b.wait(`document.getElementById("verify-summary")?.className.includes("bad")`)
		seq := eval[string](b, `document.querySelector('[data-failure="orders/2026"] [data-seq]').textContent`)
		reason := eval[string](b, `document.querySelector('[data-failure="orders/2026"] [data-reason]').textContent`)
		if seq != "2" || reason == "" {
			t.Fatalf("verify shows seq %q reason %q, want seq 2 and a reason", seq, reason)
		}
		b.screenshot("verify")
	})
}

// seedConsole writes what the pages show: a stock, valuation and journal
// setup for the forms, a chain of JSON entries, and a chain whose name
// and payload hold markup.
func seedConsole(cs *consoleServer, token string) {
	for _, r := range [][2]string{
		{"/v1/stock/items", `{"id":"SKU-1","name":"Ball valve","scale":0}`},
		{"/v1/stock/locations", `{"id":"WH-1","name":"Warehouse 1"}`},
		{"/v1/stock/locations", `{"id":"WH-2","name":"Warehouse 2"}`},
		{"/v1/stock/locations", `{"id":"WH-3","name":"Warehouse 3"}`},
		{"/v1/stock/locations", `{"id":"WH-4","name":"Warehouse 4"}`},
		{"/v1/val/items", `{"id":"SKU-1","method":"moving_average","quantity_scale":0,"currency":"EUR","minor_unit":2}`},
		{"/v1/fin/books/main/currencies", `{"code":"EUR","exponent":2}`},
		{"/v1/fin/books/main/accounts", `{"code":"1400","name":"Inventory","type":"asset"}`},
		{"/v1/fin/books/main/accounts", `{"code":"2100","name":"Goods received not invoiced","type":"liability"}`},
	} {
		cs.must("POST", r[0], token, r[1])
	}
	for _, p := range []string{`{"order":"SO-1001","status":"created"}`, `{"order":"SO-1001","status":"picked","lines":2}`,
		`{"order":"SO-1001","status":"invoiced","total":"1250.00","currency":"EUR"}`} {
		cs.must("POST", "/v1/chains/orders/2026/entries", token,
			fmt.Sprintf(`{"type":"order.event/v1","payload":%q}`, base64.StdEncoding.EncodeToString([]byte(p))))
	}
	hostile := `<img src=x onerror="window.__pwned=1"><script>window.__pwned=1</script>`
	cs.must("POST", "/v1/chains/"+url.PathEscape("x<script>window.__pwned=1</script>")+"/entries", token,
		fmt.Sprintf(`{"type":"note/v1","payload":%q}`, base64.StdEncoding.EncodeToString([]byte(hostile))))
}
