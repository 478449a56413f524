package main

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/ledgerworks/ledger/console"
	"github.com/ledgerworks/ledger/outbox/signature"
)

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
	if err := os.WriteFile(config, []byte(fmt.Sprintf(`{"deliveries":[{"tenant":"acme","topic":"business-events","url":%q,"secret":%q,"allow_private_addresses":true}],`+
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
		// The key revoked while signed in: the next page asks to sign in again.
		var me struct{ ID string }
		json.Unmarshal(cs.must("GET", "/v1/whoami", reader, ""), &me) //nolint:errcheck // an empty id fails below
		cs.must("DELETE", "/v1/apikeys/"+me.ID+"?reason=left", admin, "")
		b.goTo("#/chains")
		b.wait(`document.getElementById("signin-status")?.textContent.includes("UNAUTHENTICATED")`)
		if eval[string](b, `sessionStorage.getItem("ledger.console.token") ?? ""`) != "" {
			t.Fatal("a revoked key stays in sessionStorage")
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
