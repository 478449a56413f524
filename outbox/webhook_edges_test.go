package outbox_test

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"os/exec"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/ledgerworks/ledger/chain"
	"github.com/ledgerworks/ledger/outbox"
)

// countingServer is a real HTTP server on 127.0.0.1 that counts its
// requests and answers body.
func countingServer(t *testing.T, body string) (*httptest.Server, *atomic.Int64) {
	t.Helper()
	var n atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.Add(1)
		_, _ = io.Copy(io.Discard, r.Body)
		_, _ = io.WriteString(w, body)
	}))
	t.Cleanup(srv.Close)
	return srv, &n
}

func testDelivery() *outbox.Delivery {
	return &outbox.Delivery{Lease: outbox.Lease{Message: outbox.Message{Key: "outbox:00", Payload: []byte(`{"n":1}`)}}}
}

// A redirect is never followed, whatever its status: the attempt fails
// permanently, its Location is recorded, the target receives nothing and
// none of the target's answer is recorded.
func TestWebhookNeverFollowsRedirects(t *testing.T) {
	target, hits := countingServer(t, "secret-of-the-internal-service")
	for _, code := range []int{301, 302, 303, 307, 308} {
		loc := target.URL + "/secret"
		receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Location", loc)
			w.WriteHeader(code)
		}))
		deliver, err := outbox.Webhook(outbox.WebhookOptions{URL: receiver.URL, Secret: webhookSecret, AllowPrivateAddresses: true})
		if err != nil {
			t.Fatal(err)
		}
		d := testDelivery()
		err = deliver(context.Background(), d)
		receiver.Close()
		if !errors.Is(err, outbox.ErrPermanent) {
			t.Errorf("HTTP %d: %v, want a permanent failure", code, err)
		}
		if want := fmt.Sprintf("HTTP %d redirect not followed, Location %q", code, loc); d.Detail != want {
			t.Errorf("HTTP %d: detail %q, want %q", code, d.Detail, want)
		}
		if strings.Contains(d.Detail, "secret-of") {
			t.Errorf("HTTP %d: the target's answer was recorded: %q", code, d.Detail)
		}
	}
	if n := hits.Load(); n != 0 {
		t.Fatalf("the redirect target received %d requests", n)
	}
}

// A URL naming a refused address is refused when the deliverer is built,
// unless the delivery allows private addresses.
func TestWebhookRefusesPrivateURLs(t *testing.T) {
	for _, u := range []string{"http://127.0.0.1:8080/hook", "http://127.1.2.3/", "http://localhost:9/", "http://api.LOCALHOST./x",
		"http://[::1]:80/", "http://[::ffff:127.0.0.1]/", "http://[::ffff:169.254.169.254]/", "http://169.254.169.254/latest/meta-data",
		"http://0.0.0.0/", "http://10.1.2.3/", "http://172.16.0.1/", "http://192.168.1.1/", "http://100.64.0.1/",
		"http://[fe80::1%25eth0]/", "http://[fd00::1]/", "http://[64:ff9b::7f00:1]/", "http://[2002:7f00:1::]/", "http://224.0.0.1/",
		"https://255.255.255.255/"} {
		_, err := outbox.Webhook(outbox.WebhookOptions{URL: u, Secret: webhookSecret})
		if !errors.Is(err, outbox.ErrAddressRefused) || !errors.Is(err, chain.ErrInvalid) {
			t.Errorf("%s: %v, want ErrAddressRefused", u, err)
		}
		if _, err := outbox.Webhook(outbox.WebhookOptions{URL: u, Secret: webhookSecret, AllowPrivateAddresses: true}); err != nil {
			t.Errorf("%s allowed: %v", u, err)
		}
	}
	for _, u := range []string{"https://hooks.example.com/x", "http://93.184.216.34/", "http://[2606:4700::1111]/", "http://[64:ff9b::5db8:d822]/"} {
		if _, err := outbox.Webhook(outbox.WebhookOptions{URL: u, Secret: webhookSecret}); err != nil {
			t.Errorf("%s: %v", u, err)
		}
	}
}

// A name that resolves to loopback passes the URL check and is refused
// when the deliverer connects: the receiver on that address receives
// nothing, and the failure is permanent. With the allowance, the same name
// is delivered (the resolver does answer).
func TestWebhookRefusesResolvedLoopbackAtConnect(t *testing.T) {
	receiver, hits := countingServer(t, "ok")
	resolver := loopbackResolver(t)
	port := receiver.Listener.Addr().(*net.TCPAddr).Port
	url := fmt.Sprintf("http://receiver.test:%d/hook", port)

	deliver, err := outbox.WebhookResolving(outbox.WebhookOptions{URL: url, Secret: webhookSecret}, resolver)
	if err != nil {
		t.Fatal(err)
	}
	err = deliver(context.Background(), testDelivery())
	var ae *outbox.AddressError
	if !errors.Is(err, outbox.ErrPermanent) || !errors.As(err, &ae) || ae.Addr != netip.MustParseAddr("127.0.0.1") {
		t.Fatalf("delivery to a name resolving to 127.0.0.1: %v, want a permanent *AddressError", err)
	}
	if n := hits.Load(); n != 0 {
		t.Fatalf("the receiver on loopback received %d requests", n)
	}

	allowed, err := outbox.WebhookResolving(outbox.WebhookOptions{URL: url, Secret: webhookSecret, AllowPrivateAddresses: true}, resolver)
	if err != nil {
		t.Fatal(err)
	}
	if err := allowed(context.Background(), testDelivery()); err != nil {
		t.Fatalf("allowed delivery: %v", err)
	}
	if n := hits.Load(); n != 1 {
		t.Fatalf("the receiver received %d requests, want 1", n)
	}
}

// proxyChildEnv runs TestWebhookIgnoresEnvironmentProxy's child: a fresh
// process, so that net/http reads HTTP_PROXY on its first use.
const proxyChildEnv = "OUTBOX_TEST_PROXY_CHILD_RECEIVER_PORT"

// HTTP_PROXY is not used by the deliverer: in a process whose environment
// names a proxy (which a plain client does use), the delivery goes to the
// receiver and the proxy receives nothing from it.
func TestWebhookIgnoresEnvironmentProxy(t *testing.T) {
	if port := os.Getenv(proxyChildEnv); port != "" {
		proxyChild(t, port)
		return
	}
	receiver, delivered := countingServer(t, "ok")
	proxy, proxied := countingServer(t, "from the proxy")
	cmd := exec.Command(os.Args[0], "-test.run=^TestWebhookIgnoresEnvironmentProxy$", "-test.count=1")
	cmd.Env = append(os.Environ(), fmt.Sprintf("%s=%d", proxyChildEnv, receiver.Listener.Addr().(*net.TCPAddr).Port),
		"HTTP_PROXY="+proxy.URL, "http_proxy="+proxy.URL, "NO_PROXY=", "no_proxy=")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	if d, p := delivered.Load(), proxied.Load(); d != 1 || p != 1 {
		t.Fatalf("receiver got %d requests (want the delivery), proxy %d (want only the plain client's)\n%s", d, p, out)
	}
}

func proxyChild(t *testing.T, port string) {
	resolver := loopbackResolver(t)
	url := "http://receiver.test:" + port + "/hook"
	deliver, err := outbox.WebhookResolving(outbox.WebhookOptions{URL: url, Secret: webhookSecret, AllowPrivateAddresses: true}, resolver)
	if err != nil {
		t.Fatal(err)
	}
	if err := deliver(context.Background(), testDelivery()); err != nil {
		t.Fatalf("delivery: %v", err)
	}
	// The control: a plain client sends the same URL to the proxy.
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(body) != "from the proxy" {
		t.Fatalf("the plain client was not proxied: %q", body)
	}
}

// loopbackResolver is a resolver whose DNS server, on 127.0.0.1, answers
// every A question with 127.0.0.1 (and AAAA questions with no address).
func loopbackResolver(t *testing.T) *net.Resolver {
	t.Helper()
	conn, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	go serveLoopbackDNS(conn)
	addr := conn.LocalAddr().String()
	return &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "udp", addr)
	}}
}

func serveLoopbackDNS(conn net.PacketConn) {
	buf := make([]byte, 1500)
	for {
		n, from, err := conn.ReadFrom(buf)
		if err != nil {
			return
		}
		q := buf[:n]
		end := 12 // the question's name, then its type and class
		for end < n && q[end] != 0 {
			end += int(q[end]) + 1
		}
		end += 5
		if n < 12 || end > n {
			continue
		}
		qtype := binary.BigEndian.Uint16(q[end-4:])
		resp := append([]byte(nil), q[:end]...)
		resp[2], resp[3] = 0x81, 0x80 // a response, recursion desired and available, no error
		binary.BigEndian.PutUint16(resp[4:], 1)
		binary.BigEndian.PutUint16(resp[8:], 0)
		binary.BigEndian.PutUint16(resp[10:], 0)
		if qtype == 1 { // A
			binary.BigEndian.PutUint16(resp[6:], 1)
			resp = append(resp, 0xc0, 0x0c, 0, 1, 0, 1, 0, 0, 0, 60, 0, 4, 127, 0, 0, 1)
		} else {
			binary.BigEndian.PutUint16(resp[6:], 0)
		}
		_, _ = conn.WriteTo(resp, from)
	}
}
