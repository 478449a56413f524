package main

import (
	"bufio"
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
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"

	"github.com/ledgerworks/ledger/console"
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
