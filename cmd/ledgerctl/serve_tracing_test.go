package main

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"
)

// otlpReceiver is an OTLP/HTTP trace receiver: it decodes every
// ExportTraceServiceRequest posted to /v1/traces.
type otlpReceiver struct {
	mu       sync.Mutex
	requests []*coltracepb.ExportTraceServiceRequest
}

func (rc *otlpReceiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || r.URL.Path != "/v1/traces" || r.Header.Get("Content-Type") != "application/x-protobuf" {
		http.Error(w, "want POST /v1/traces application/x-protobuf", http.StatusBadRequest)
		return
	}
	var body io.Reader = r.Body
	if r.Header.Get("Content-Encoding") == "gzip" {
		zr, err := gzip.NewReader(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		body = zr
	}
	b, err := io.ReadAll(body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var req coltracepb.ExportTraceServiceRequest
	if err := proto.Unmarshal(b, &req); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	rc.mu.Lock()
	rc.requests = append(rc.requests, &req)
	rc.mu.Unlock()
	resp, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
	w.Header().Set("Content-Type", "application/x-protobuf")
	w.Write(resp)
}

// receivedSpan is one decoded span with its resource's service name.
type receivedSpan struct {
	service string
	span    *tracepb.Span
}

func (rc *otlpReceiver) spans() []receivedSpan {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	var out []receivedSpan
	for _, req := range rc.requests {
		for _, rs := range req.ResourceSpans {
			service := ""
			for _, kv := range rs.Resource.GetAttributes() {
				if kv.Key == "service.name" {
					service = kv.Value.GetStringValue()
				}
			}
			for _, ss := range rs.ScopeSpans {
				for _, s := range ss.Spans {
					out = append(out, receivedSpan{service: service, span: s})
				}
			}
		}
	}
	return out
}

func spanAttr(s *tracepb.Span, key string) string {
	for _, kv := range s.Attributes {
		if kv.Key == key {
			if v, ok := kv.Value.Value.(*commonpb.AnyValue_IntValue); ok {
				return strconv.FormatInt(v.IntValue, 10)
			}
			return kv.Value.GetStringValue()
		}
	}
	return ""
}

// serve with OTEL_EXPORTER_OTLP_ENDPOINT exports its spans over OTLP/HTTP:
// the request (a child of the caller's traceparent), the guard's decision
// and the ledger transaction arrive, decoded, under OTEL_SERVICE_NAME, by
// the time serve has stopped.
func TestServeExportsTracesOverOTLP(t *testing.T) {
	rc := &otlpReceiver{}
	collector := httptest.NewServer(rc)
	defer collector.Close()
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", collector.URL)
	t.Setenv("OTEL_SERVICE_NAME", "ledger-otlp-test")
	t.Setenv("OTEL_TRACES_SAMPLER", "parentbased_always_on")

	l := newFileLedger(t)
	l.must("init")
	var key struct{ Token string }
	if err := json.Unmarshal([]byte(l.must("apikey", "create", "--tenant", "acme", "--scopes", "read,write", "-o", "json")), &key); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	out, w := io.Pipe()
	code := make(chan int, 1)
	var stderr bytes.Buffer
	go func() {
		code <- execute(ctx, newApp(), []string{"--db", l.name, "serve", "--addr", "127.0.0.1:0"}, nil, w, &stderr)
		w.Close()
	}()
	sc := bufio.NewScanner(out)
	if !sc.Scan() || !strings.HasPrefix(sc.Text(), "listening on http://") {
		t.Fatalf("first line %q", sc.Text())
	}
	go io.Copy(io.Discard, out)
	base := strings.TrimPrefix(sc.Text(), "listening on ")
	const traceID, parentID = "0af7651916cd43dd8448eb211c80319c", "b7ad6b7169203331"
	req, _ := http.NewRequest(http.MethodPost, base+"/v1/chains/c/entries", strings.NewReader(`{"type":"t","payload":"cA=="}`))
	req.Header.Set("Authorization", "Bearer "+key.Token)
	req.Header.Set("Idempotency-Key", "k")
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Traceparent", "00-"+traceID+"-"+parentID+"-01")
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
			t.Fatalf("exit %d: %s", c, stderr.String())
		}
	case <-time.After(20 * time.Second):
		t.Fatal("serve did not stop")
	}

	byName := map[string]*tracepb.Span{}
	for _, s := range rc.spans() {
		if hex.EncodeToString(s.span.TraceId) != traceID {
			continue
		}
		if s.service != "ledger-otlp-test" {
			t.Fatalf("span %q of service %q", s.span.Name, s.service)
		}
		byName[s.span.Name] = s.span
	}
	var request *tracepb.Span
	for name, s := range byName {
		if strings.HasPrefix(name, "POST /v1/chains/") {
			request = s
		}
	}
	if request == nil || hex.EncodeToString(request.ParentSpanId) != parentID || request.Kind != tracepb.Span_SPAN_KIND_SERVER ||
		spanAttr(request, "http.response.status_code") != "201" || spanAttr(request, "http.route") == "" {
		t.Fatalf("no server span under the caller's: got %v", byName)
	}
	guard, commit := byName["idempotency.guard"], byName["chain.transaction"]
	if guard == nil || !bytes.Equal(guard.ParentSpanId, request.SpanId) || spanAttr(guard, "idempotency.outcome") != "executed" {
		t.Fatalf("guard span %v", guard)
	}
	if commit == nil || !bytes.Equal(commit.ParentSpanId, guard.SpanId) || spanAttr(commit, "ledger.group_commit.size") != "1" {
		t.Fatalf("ledger span %v (spans %v)", commit, byName)
	}
}

// A tracing configuration serve cannot honour is refused before anything
// listens; without an exporter variable, no tracing is set up.
func TestServeTracingConfiguration(t *testing.T) {
	for _, c := range []struct {
		env  map[string]string
		want string
	}{
		{map[string]string{"OTEL_TRACES_EXPORTER": "zipkin"}, "OTEL_TRACES_EXPORTER"},
		{map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}, "http/protobuf"},
	} {
		a := &app{environment: func(k string) string { return c.env[k] }}
		if _, _, err := a.serveTracing(context.Background()); err == nil || !strings.Contains(err.Error(), c.want) || func() bool { c, _ := classify(err); return c != exitUsage }() {
			t.Errorf("%v: %v, want a usage error naming %s", c.env, err, c.want)
		}
	}
	for _, env := range []map[string]string{{}, {"OTEL_TRACES_EXPORTER": "none", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://x"},
		{"OTEL_SDK_DISABLED": "true", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://x"}} {
		a := &app{environment: func(k string) string { return env[k] }}
		if tp, _, err := a.serveTracing(context.Background()); tp != nil || err != nil {
			t.Errorf("%v: provider %v, %v; want none", env, tp, err)
		}
	}
}
