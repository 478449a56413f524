package server_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/ledgerworks/ledger/api"
	"github.com/ledgerworks/ledger/server"
)

// scrape serves the server's MetricsHandler on a listener of its own on
// 127.0.0.1, as ledgerctl serve --metrics-addr does, and reads /metrics.
func scrape(t *testing.T, ts *testServer) string {
	t.Helper()
	ms := httptest.NewServer(ts.srv.MetricsHandler())
	defer ms.Close()
	resp, err := http.Get(ms.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /metrics on the metrics listener: %d %s", resp.StatusCode, b)
	}
	return string(b)
}

// The API port serves no metrics, with or without a key (they name every
// tenant's topics); the metrics listener serves them, and nothing else;
// two tenants' topics of one name are two series.
func TestMetricsOnTheirOwnListener(t *testing.T) {
	rc, url := newReceiver(t, func(int) int { return http.StatusOK })
	ts := startServer(t, openBolt(t), server.Options{Deliveries: []server.Delivery{
		{Tenant: "acme", Topic: api.TopicDefault, URL: url, Secret: whsec, AllowPrivateAddresses: true},
		{Tenant: "globex", Topic: api.TopicDefault, URL: url, Secret: whsec, AllowPrivateAddresses: true}}})
	acme := ts.key("acme", allScopes...)
	globex := ts.key("globex", allScopes...)
	fixture(t, ts, acme)
	fixture(t, ts, globex)
	rc.wait(t, 10*time.Second)
	rc.wait(t, 10*time.Second)

	for _, token := range []string{"", acme} {
		r := ts.do(http.MethodGet, "/metrics", token, "", nil)
		r.wantProblem(t, http.StatusNotFound, api.CodeNotFound)
		if strings.Contains(string(r.body), "outbox_") {
			t.Fatalf("the API port answered metrics: %s", r.body)
		}
	}

	var body string
	want := []string{`outbox_attempts_total{outcome="delivered",tenant="acme",topic="business-events"} 1`,
		`outbox_attempts_total{outcome="delivered",tenant="globex",topic="business-events"} 1`}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		body = scrape(t, ts)
		if strings.Contains(body, want[0]) && strings.Contains(body, want[1]) || time.Now().After(deadline) {
			break
		}
	}
	for _, series := range want {
		if !strings.Contains(body, series) {
			t.Errorf("metrics lack %s:\n%s", series, grepLines(body, "outbox_attempts_total"))
		}
	}

	ms := httptest.NewServer(ts.srv.MetricsHandler())
	defer ms.Close()
	for _, path := range []string{"/", "/v1/chains/c/head", "/metrics/x"} {
		resp, err := http.Get(ms.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusNotFound {
			t.Errorf("metrics listener GET %s: %d, want 404", path, resp.StatusCode)
		}
	}
}

func grepLines(s, substr string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, substr) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
