package idempotency

import (
	"bytes"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
	"time"
)

// A response WriteResponse hands over whole is the captured response, and
// whatever the handler does to the writer afterwards is captured as it
// would be had the response been written piece by piece.
func TestCaptureWriteResponse(t *testing.T) {
	header := http.Header{"Content-Type": {"application/json"}}
	for _, tc := range []struct {
		name  string
		after func(w http.ResponseWriter)
		want  Response
	}{
		{"alone", func(http.ResponseWriter) {},
			Response{Status: 201, Header: http.Header{"Content-Type": {"application/json"}}, Body: []byte(`{"a":1}`)}},
		{"then a write", func(w http.ResponseWriter) { w.Write([]byte(`,"b"`)) },
			Response{Status: 201, Header: http.Header{"Content-Type": {"application/json"}}, Body: []byte(`{"a":1},"b"`)}},
		{"then a header", func(w http.ResponseWriter) {
			w.Header().Set("Etag", `"x"`)
			w.Header().Set("Content-Type", "text/plain")
		},
			Response{Status: 201, Header: http.Header{"Content-Type": {"text/plain"}, "Etag": {`"x"`}}, Body: []byte(`{"a":1}`)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cw := &captureWriter{w: httptest.NewRecorder(), limit: 1 << 10}
			WriteResponse(cw, Response{Status: 201, Header: header, Body: []byte(`{"a":1}`)})
			tc.after(cw)
			got := cw.response()
			got.Body = append([]byte{}, got.Body...)
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("captured %+v, want %+v", got, tc.want)
			}
			if !reflect.DeepEqual(header, http.Header{"Content-Type": {"application/json"}}) {
				t.Fatalf("the handler's header changed: %v", header)
			}
			cw.send()
			rec := cw.w.(*httptest.ResponseRecorder)
			if rec.Code != tc.want.Status || rec.Body.String() != string(tc.want.Body) || rec.Header().Get("Content-Type") != tc.want.Header.Get("Content-Type") {
				t.Fatalf("sent %d %v %q, want %+v", rec.Code, rec.Header(), rec.Body, tc.want)
			}
		})
	}
	// A header asked for before, or a body over the limit: written piece by
	// piece (over the limit: passed through, not stored).
	cw := &captureWriter{w: httptest.NewRecorder(), limit: 4}
	WriteResponse(cw, Response{Status: 201, Body: []byte(`{"a":1}`)})
	if cw.hasDirect || !cw.oversize {
		t.Fatalf("a body over the limit was taken whole (oversize %v)", cw.oversize)
	}
	cw = &captureWriter{w: httptest.NewRecorder(), limit: 1 << 10}
	cw.Header().Set("Location", "/p/1")
	WriteResponse(cw, Response{Status: 201, Header: header, Body: []byte(`{}`)})
	if got := cw.response(); cw.hasDirect || got.Header.Get("Location") != "/p/1" || got.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("captured %+v", got)
	}
}

// The heartbeat goroutine runs while attempts run and ends when none does.
func TestHeartbeatsEndWhenIdle(t *testing.T) {
	g := &Guard{store: NewMemoryStore(), now: time.Now, opts: Options{HeartbeatInterval: time.Millisecond, LeaseDuration: time.Second}}
	c := &Context{guard: g}
	g.beats.start(g, c)
	g.beats.stop(c)
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(time.Millisecond) {
		g.beats.mu.Lock()
		ticking := g.beats.ticking
		g.beats.mu.Unlock()
		if !ticking {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the heartbeat goroutine still runs with no attempt running")
		}
	}
	g.beats.start(g, c) // and starts again
	defer g.beats.stop(c)
	g.beats.mu.Lock()
	defer g.beats.mu.Unlock()
	if !g.beats.ticking {
		t.Fatal("no heartbeat goroutine for a running attempt")
	}
}

// A running attempt whose lease is lost is logged once and no longer
// extended.
func TestHeartbeatLeaseLost(t *testing.T) {
	var logs bytes.Buffer
	g := &Guard{store: NewMemoryStore(), now: time.Now, log: slog.New(slog.NewTextHandler(&logs, nil)),
		opts: Options{HeartbeatInterval: time.Hour, LeaseDuration: 2 * time.Hour}}
	r := httptest.NewRequest(http.MethodPost, "/p", nil)
	c := &Context{Scope: Scope{Operation: "POST /p", User: "u", Key: "k"}, guard: g, token: "not-held",
		run: &attempt{req: r, ctx: guardContext{Context: r.Context()}}}
	g.beats.start(g, c)
	defer g.beats.stop(c)
	g.beats.extend(g, c)
	g.beats.mu.Lock()
	_, running := g.beats.running[c]
	g.beats.mu.Unlock()
	if running || !strings.Contains(logs.String(), "lease lost") {
		t.Fatalf("after a lost lease: still extended %v, log %q", running, logs.String())
	}
}
