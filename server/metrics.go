package server

import (
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/ledgerworks/ledger/chain"
)

// Limits of the metrics handler: a scrape beyond MetricsScrapesMax at
// once is answered 503, and one that takes longer than
// MetricsScrapeTimeout is answered 503 too.
const (
	MetricsScrapesMax    = 4
	MetricsScrapeTimeout = 10 * time.Second
)

// MetricsHandler serves the registry's series in the Prometheus text
// format at GET /metrics, and answers anything else 404. Serve it on a
// listener of its own (ledgerctl serve --metrics-addr), reachable by the
// scraper only: the series name every tenant's outbox topics, so the API's
// handler, which any tenant's client reaches, does not serve them.
func (s *Server) MetricsHandler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(s.registry, promhttp.HandlerOpts{
		MaxRequestsInFlight: MetricsScrapesMax, Timeout: MetricsScrapeTimeout}))
	return mux
}

// httpMetrics are the series of the HTTP layer.
type httpMetrics struct {
	requests *prometheus.CounterVec
	duration *prometheus.HistogramVec
	inFlight prometheus.Gauge
	counters sync.Map // routeCode → observers
}

func newHTTPMetrics(reg prometheus.Registerer) *httpMetrics {
	m := &httpMetrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "ledger_http_requests_total",
			Help: "HTTP requests by route (method and path template) and status code."}, []string{"route", "code"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "ledger_http_request_duration_seconds",
			Help:    "Time from a request's arrival to its handler's return, by route.",
			Buckets: []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10}}, []string{"route"}),
		inFlight: prometheus.NewGauge(prometheus.GaugeOpts{Name: "ledger_http_requests_in_flight",
			Help: "Requests being handled."}),
	}
	reg.MustRegister(m.requests, m.duration, m.inFlight)
	return m
}

// observe counts a request of rt (nil: no route matched).
func (m *httpMetrics) observe(rt *Route, status int, elapsed time.Duration) {
	k := routeCode{rt, status}
	c, ok := m.counters.Load(k)
	if !ok {
		name := unmatchedRoute
		if rt != nil {
			name = rt.routeKey()
		}
		c, _ = m.counters.LoadOrStore(k, observers{m.requests.WithLabelValues(name, strconv.Itoa(status)),
			m.duration.WithLabelValues(name)})
	}
	o := c.(observers)
	o.count.Inc()
	o.duration.Observe(elapsed.Seconds())
}

// unmatchedRoute labels the requests no route matched.
const unmatchedRoute = "unmatched"

// routeCode keys the series of a route and a status, which observe keeps
// so that a request costs no label lookup.
type routeCode struct {
	route  *Route
	status int
}

type observers struct {
	count    prometheus.Counter
	duration prometheus.Observer
}

// EngineMetrics implements chain.Metrics with Prometheus collectors: give
// it to chain.Options.Metrics when opening the ledger the server serves,
// on the server's registry.
type EngineMetrics struct {
	commits  prometheus.Counter
	requests prometheus.Histogram
	duration prometheus.Histogram
	replays  prometheus.Counter
}

var _ chain.Metrics = (*EngineMetrics)(nil)

// NewEngineMetrics creates the engine's collectors and registers them with
// reg.
func NewEngineMetrics(reg prometheus.Registerer) *EngineMetrics {
	m := &EngineMetrics{
		commits: prometheus.NewCounter(prometheus.CounterOpts{Name: "ledger_group_commits_total",
			Help: "Storage transactions of the group commit."}),
		requests: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "ledger_group_commit_requests",
			Help: "Requests carried by one group commit.", Buckets: prometheus.ExponentialBuckets(1, 2, 12)}),
		duration: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "ledger_group_commit_duration_seconds",
			Help: "Time of one group commit, its fsync included.", Buckets: prometheus.ExponentialBuckets(0.0001, 2, 16)}),
		replays: prometheus.NewCounter(prometheus.CounterOpts{Name: "ledger_append_replays_total",
			Help: "Appends answered from an existing entry (the ledger's UNIQUE(chain, key))."}),
	}
	reg.MustRegister(m.commits, m.requests, m.duration, m.replays)
	return m
}

// GroupCommitted implements chain.Metrics.
func (m *EngineMetrics) GroupCommitted(requests int, d time.Duration) {
	m.commits.Inc()
	m.requests.Observe(float64(requests))
	m.duration.Observe(d.Seconds())
}

// Replayed implements chain.Metrics.
func (m *EngineMetrics) Replayed() { m.replays.Inc() }
