package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/trace"

	"github.com/ledgerworks/ledger/apikey"
	"github.com/ledgerworks/ledger/audit"
	"github.com/ledgerworks/ledger/chain"
	"github.com/ledgerworks/ledger/checkpoint"
	"github.com/ledgerworks/ledger/idempotency"
	"github.com/ledgerworks/ledger/idempotency/idempotencyprom"
	"github.com/ledgerworks/ledger/outbox"
	"github.com/ledgerworks/ledger/outbox/outboxprom"
	"github.com/ledgerworks/ledger/server/ratelimit"
)

// Defaults and limits of Options.
const (
	// BodySizeMaxDefault bounds a request body when Options.BodySizeMax is
	// zero.
	BodySizeMaxDefault = 1 << 20
	// BodySizeMaxLimit is the largest Options.BodySizeMax.
	BodySizeMaxLimit = 64 << 20
	// IdempotencyCacheSizeDefault is how many finished records the guard
	// keeps in memory to answer replays without a store read.
	IdempotencyCacheSizeDefault = 10_000
	// IdempotencyLeaseDefault is how long an attempt holds its key without
	// a heartbeat (a running attempt extends it every third of it): with
	// JobsIntervalDefault, a dead server's keys are free within 12 s, and
	// a retry takes a key over as soon as its lease ends.
	IdempotencyLeaseDefault = 10 * time.Second
	// JobsIntervalDefault is how often the idempotency jobs recover the
	// attempts whose lease ended.
	JobsIntervalDefault = 2 * time.Second
	// CleanupIntervalMin is the least time between two purges of expired
	// records (each a scan of the store), whatever the jobs interval.
	CleanupIntervalMin = time.Minute
	// ResponseSizeMax bounds the JSON of one page of a list route: a page
	// ends before the item that would take it past the bound, with the
	// cursor of the next page, and always holds its first item, so that a
	// response is at most ResponseSizeMax and one item.
	ResponseSizeMax = 4 << 20
)

// Options configure a Server. DB is required; the zero value of every other
// field is documented and usable.
type Options struct {
	// DB is the ledger. The server never closes it: its owner does, after
	// Stop.
	DB *chain.DB
	// Auth authenticates API keys; apikey.NewAuthenticator(DB) when nil.
	Auth *apikey.Authenticator
	// IdempotencyStore keeps the replay guard's records;
	// idempotency.NewLedgerStore(DB) when nil (the embedded default, whose
	// SUCCESS records commit in the transaction of the entries they
	// describe). Use pgstore for several instances on one PostgreSQL.
	IdempotencyStore idempotency.Store
	// IdempotencyTTL is how long a finished request is replayed;
	// idempotency.TTLDefault when zero.
	IdempotencyTTL time.Duration
	// IdempotencyLease is how long an attempt holds its key without a
	// heartbeat (the guard extends it every third of it while the handler
	// runs); IdempotencyLeaseDefault when zero. A dead server's keys are
	// free once it ends: at once for a retry, which takes the key over,
	// and within JobsInterval more for the jobs.
	IdempotencyLease time.Duration
	// IdempotencyCacheSize is the records kept in memory for replays;
	// IdempotencyCacheSizeDefault when zero, none when negative.
	IdempotencyCacheSize int
	// JobsInterval is how often the idempotency jobs recover the attempts
	// whose lease ended; JobsIntervalDefault when zero, never when
	// negative. Expired records are purged every JobsInterval too, but
	// not more often than every CleanupIntervalMin (or IdempotencyTTL
	// when shorter).
	JobsInterval time.Duration
	// RateLimit configures the token buckets per API key and per client
	// address in front of every /v1 route; none when both rates are zero.
	// A nil KeyID buckets by the authenticated key (Authenticator.KeyIDOf),
	// a nil Logger logs to Logger. With a Store (pgbuckets) the buckets
	// are shared by every instance on it; without, they are per process.
	RateLimit ratelimit.Options
	// BodySizeMax bounds a request body (413 PAYLOAD_TOO_LARGE);
	// BodySizeMaxDefault when zero.
	BodySizeMax int64
	// Providers receive webhooks at /v1/webhooks/{name}.
	Providers []Provider
	// Deliveries are the outbox topics the server delivers by webhook.
	Deliveries []Delivery
	// OutboxLease is the lease of the delivering workers. When zero, each
	// tenant's worker derives it from its longest delivery timeout
	// (outbox.LeaseFor, at least outbox.LeaseDurationDefault); when set,
	// New refuses a delivery whose timeout needs a longer lease
	// (outbox.ErrTimeoutBeyondLease).
	OutboxLease time.Duration
	// ReleaseOrphans releases, at Start, every outbox lease and every
	// PROCESSING record of the replay guard as a transient failure, due at
	// once: right when the server is the only process that
	// writes the ledger (the embedded default), so every lease is an orphan
	// of a process that died. Never set it for instances sharing a
	// PostgreSQL database.
	ReleaseOrphans bool
	// Registry receives the metrics MetricsHandler serves; a new registry
	// when nil. Register the engine's (NewEngineMetrics) on the same one.
	Registry *prometheus.Registry
	// Logger receives the access log and the workers' logs; slog.Default()
	// when nil.
	Logger *slog.Logger
	// Clock returns the time for the guard and the webhook verifiers;
	// time.Now when nil.
	Clock func() time.Time
	// CheckpointSignerKey, when set (a key of ledgerctl keygen), makes the
	// server sign a checkpoint of the ledger at Start and then every
	// CheckpointInterval when the ledger changed (audit.Publisher), and
	// answer GET /v1/proofs/entry against the newest one. No checkpoint
	// and 404 on that route when empty.
	CheckpointSignerKey string
	// CheckpointInterval is how often a checkpoint is signed;
	// CheckpointIntervalDefault when zero.
	CheckpointInterval time.Duration
	// RouteHook, when set, wraps each route's handler inside the API key
	// check and the replay guard, given the route's ID. It is for tests
	// (a handler held while a retry of its request arrives); leave it nil.
	RouteHook func(routeID string, next http.Handler) http.Handler
	// TracerProvider, when set, makes every request a span (a child of
	// the traceparent it carries), and is handed to the replay guard, the
	// outbox workers and the webhook verifications; see SERVER.md,
	// Tracing. The ledger's spans come from chain.Options.TracerProvider
	// of DB. None when nil: no span is started and no header read.
	TracerProvider trace.TracerProvider
}

// CheckpointIntervalDefault is Options.CheckpointInterval's default.
const CheckpointIntervalDefault = time.Minute

// Server is the HTTP API over one ledger. Build it with New, serve
// Handler(), and run its background work with Start and Stop.
type Server struct {
	opts      Options
	db        *chain.DB
	auth      *apikey.Authenticator
	ownsAuth  bool
	store     idempotency.Store
	guard     *idempotency.Guard
	jobs      *idempotency.Jobs
	limiter   *ratelimit.Limiter
	providers map[string]*provider
	log       *slog.Logger
	now       func() time.Time
	registry  *prometheus.Registry
	tracer    trace.Tracer // nil without Options.TracerProvider
	metrics   *httpMetrics
	outboxM   *outboxprom.Metrics
	keyGuard  *idempotency.Guard
	routes    []*Route
	openapi   map[string]any
	handler   http.Handler
	requests  atomic.Uint64
	idPrefix  string

	mu       sync.Mutex
	started  bool
	draining atomic.Bool
	ready    atomic.Bool
	cancel   context.CancelFunc
	workers  []*outbox.Worker
	jobsDone chan struct{}
	// publisher signs checkpoints (Options.CheckpointSignerKey); the
	// newest signed note is in checkpoint.
	publisher  *audit.Publisher
	checkpoint atomic.Pointer[[]byte]
}

// New builds the server: its guard, its routes and its handler. It starts
// nothing; Start runs the background work.
func New(opts Options) (*Server, error) {
	if opts.DB == nil {
		return nil, errors.New("server: Options.DB is required")
	}
	if opts.BodySizeMax == 0 {
		opts.BodySizeMax = BodySizeMaxDefault
	}
	if opts.BodySizeMax < 0 || opts.BodySizeMax > BodySizeMaxLimit {
		return nil, fmt.Errorf("server: BodySizeMax %d: want 1 to %d", opts.BodySizeMax, BodySizeMaxLimit)
	}
	if opts.JobsInterval == 0 {
		opts.JobsInterval = JobsIntervalDefault
	}
	if opts.IdempotencyLease < 0 {
		return nil, fmt.Errorf("server: IdempotencyLease %v: want a positive duration", opts.IdempotencyLease)
	}
	if opts.IdempotencyLease == 0 {
		opts.IdempotencyLease = IdempotencyLeaseDefault
	}
	if opts.IdempotencyCacheSize == 0 {
		opts.IdempotencyCacheSize = IdempotencyCacheSizeDefault
	}
	s := &Server{opts: opts, db: opts.DB, log: opts.Logger, now: opts.Clock, registry: opts.Registry}
	if s.log == nil {
		s.log = slog.Default()
	}
	if s.now == nil {
		s.now = time.Now
	}
	if s.registry == nil {
		s.registry = prometheus.NewRegistry()
	}
	s.idPrefix = newRequestIDPrefix()
	if opts.TracerProvider != nil {
		s.tracer = opts.TracerProvider.Tracer(TracerName)
	}
	var err error
	if s.auth = opts.Auth; s.auth == nil {
		if s.auth, err = apikey.NewAuthenticator(opts.DB, apikey.AuthOptions{}); err != nil {
			return nil, err
		}
		s.ownsAuth = true
	}
	if s.store = opts.IdempotencyStore; s.store == nil {
		if s.store, err = idempotency.NewLedgerStore(opts.DB); err != nil {
			return nil, err
		}
	}
	rl := opts.RateLimit
	if rl.KeyID == nil {
		// Bucket by authenticated keys only: a key id is not a secret, so
		// a forged token naming another key's id must not drain its bucket.
		rl.KeyID = s.keyID // Authenticator.KeyIDOf, its answer kept for the API key check
	}
	if rl.Logger == nil {
		rl.Logger = s.log
	}
	if s.limiter, err = ratelimit.New(rl); err != nil {
		return nil, err
	}
	if s.providers, err = newProviders(opts.Providers); err != nil {
		return nil, err
	}
	if opts.OutboxLease != 0 && (opts.OutboxLease < outbox.LeaseDurationMin || opts.OutboxLease > outbox.LeaseDurationMax) {
		return nil, fmt.Errorf("server: OutboxLease %v: want %v to %v", opts.OutboxLease, outbox.LeaseDurationMin, outbox.LeaseDurationMax)
	}
	if err := checkDeliveries(opts.Deliveries, opts.OutboxLease); err != nil {
		return nil, err
	}
	s.metrics = newHTTPMetrics(s.registry)
	guardMetrics := idempotencyprom.New(s.registry)
	s.outboxM = outboxprom.New(s.registry)
	guardOpts := idempotency.Options{
		Store:              s.store,
		User:               guardUser,
		Operation:          guardOperation,
		RequireKey:         true,
		RequestBodySizeMax: opts.BodySizeMax,
		TTL:                opts.IdempotencyTTL,
		LeaseDuration:      opts.IdempotencyLease,
		Logger:             s.log,
		RequestID:          RequestIDFromContext,
		Metrics:            guardMetrics,
		Clock:              opts.Clock,
		TracerProvider:     opts.TracerProvider,
		// A refusal of the ledger (bad input, a conflict) is a 4xx and is
		// stored like a success; a 5xx is a failure of the server, whose
		// retry may succeed.
		IsPermanentError: func(status int, err error) bool { return false },
		// A 503 is a store that did not answer (storeOutage), the guard's
		// or the ledger's: an outage frees the key without counting
		// toward its retries, so that it never poisons a key.
		IsOutage: func(status int, err error) bool { return status == http.StatusServiceUnavailable },
	}
	if opts.IdempotencyCacheSize > 0 {
		guardOpts.Cache = idempotency.NewLRU(opts.IdempotencyCacheSize)
	}
	if s.guard, err = idempotency.New(guardOpts); err != nil {
		return nil, err
	}
	keyOpts := guardOpts
	keyOpts.TTL, keyOpts.Cache = max(KeyReplayTTL, opts.IdempotencyLease), nil
	if s.keyGuard, err = idempotency.New(keyOpts); err != nil {
		return nil, err
	}
	s.jobs = s.guard.Jobs()
	s.routes = s.routeTable()
	s.openapi = s.OpenAPI()
	s.handler = s.buildHandler()
	return s, nil
}

// KeyReplayTTL is how long a retry of POST /v1/apikeys gets the created key
// (and its token) back: its guard record holds the token, so it is kept
// far shorter than the other routes' records.
const KeyReplayTTL = 10 * time.Minute

// routeTable is every route, in document order. It panics when a route
// breaks a rule of the API (a programmer error): every POST and DELETE is
// guarded except the webhooks and verify, and every guarded route has an
// API key.
func (s *Server) routeTable() []*Route {
	var routes []*Route
	for _, group := range [][]*Route{s.entryRoutes(), s.stockRoutes(), s.finRoutes(), s.valRoutes(), s.businessRoutes(),
		s.outboxRoutes(), s.webhookRoutes(), s.inspectRoutes(), s.adminRoutes(), s.systemRoutes()} {
		routes = append(routes, group...)
	}
	seen := map[string]bool{}
	for _, rt := range routes {
		changes := rt.Method == http.MethodPost || rt.Method == http.MethodDelete
		unguarded := rt.ID == "webhooks.receive" || rt.ID == "verify"
		if changes != (rt.Guarded || unguarded) || rt.Guarded && rt.Scope == "" || rt.write != nil && !rt.Guarded ||
			seen[rt.routeKey()] || seen[rt.ID] {
			panic("server: route " + rt.routeKey() + " breaks the route table's rules")
		}
		seen[rt.routeKey()], seen[rt.ID] = true, true
	}
	return routes
}

// Handler returns the server's HTTP handler: every route behind the
// request id, the access log, the metrics and the body limit.
func (s *Server) Handler() http.Handler { return s.handler }

// Registry returns the registry MetricsHandler serves.
func (s *Server) Registry() *prometheus.Registry { return s.registry }

// Start releases orphaned outbox leases (Options.ReleaseOrphans), starts
// the outbox workers of Options.Deliveries and the idempotency jobs, and
// marks the server ready. It returns once they run; ctx bounds the start
// only.
func (s *Server) Start(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.started {
		return errors.New("server: already started")
	}
	if s.opts.ReleaseOrphans {
		// The guard's PROCESSING records: the ledger store keeps them in
		// memory, so only this process's can exist; none should be left
		// before it serves.
		lease := s.opts.IdempotencyLease
		if _, err := s.jobs.RecoverStuckRecords(ctx, -lease-time.Second, idempotency.JobBatchSizeDefault); err != nil {
			return fmt.Errorf("server: releasing orphaned idempotency records: %w", err)
		}
		n, err := ReleaseOrphanLeases(ctx, s.db, s.now(), s.opts.Deliveries)
		if err != nil {
			return fmt.Errorf("server: releasing orphaned outbox leases: %w", err)
		}
		if n > 0 {
			s.log.LogAttrs(ctx, slog.LevelWarn, "released orphaned outbox leases", slog.Int("messages", n))
		}
	}
	runCtx, cancel := context.WithCancel(context.Background())
	workers, err := s.startWorkers(ctx)
	if err != nil {
		cancel()
		return err
	}
	if s.opts.CheckpointSignerKey != "" {
		interval := s.opts.CheckpointInterval
		if interval == 0 {
			interval = CheckpointIntervalDefault
		}
		s.publisher = &audit.Publisher{DB: s.db, SignerKey: s.opts.CheckpointSignerKey, Interval: interval, Logger: s.log,
			Publish: func(_ context.Context, signed []byte, _ checkpoint.Checkpoint) error {
				s.checkpoint.Store(&signed)
				return nil
			}}
		if err := s.publisher.Start(runCtx); err != nil {
			cancel()
			for _, w := range workers {
				w.Stop(ctx) //nolint:errcheck // the checkpoint's error is the one reported
			}
			return fmt.Errorf("server: signing the first checkpoint: %w", err)
		}
	}
	s.workers, s.cancel, s.started = workers, cancel, true
	s.jobsDone = make(chan struct{})
	go func() {
		defer close(s.jobsDone)
		if s.opts.JobsInterval > 0 {
			s.runJobs(runCtx)
		}
	}()
	s.ready.Store(true)
	return nil
}

// runJobs runs the idempotency jobs every JobsInterval until ctx ends:
// the recovery of every attempt whose lease has ended (a live attempt
// extends its lease, so an ended one is dead: there is no second wait),
// and, at most every CleanupIntervalMin (or TTL when shorter), the purge of
// expired records.
func (s *Server) runJobs(ctx context.Context) {
	t := time.NewTicker(s.opts.JobsInterval)
	defer t.Stop()
	ttl := s.opts.IdempotencyTTL
	if ttl == 0 {
		ttl = idempotency.TTLDefault
	}
	cleanupEvery := min(CleanupIntervalMin, ttl)
	var cleaned time.Time
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if _, err := s.jobs.RecoverStuckRecords(ctx, 0, idempotency.JobBatchSizeDefault); err != nil && ctx.Err() == nil {
			s.log.LogAttrs(ctx, slog.LevelError, "idempotency recovery failed", slog.Any("error", err))
		}
		if now := time.Now(); now.Sub(cleaned) >= cleanupEvery {
			cleaned = now
			if _, err := s.jobs.CleanupExpiredRecords(ctx, idempotency.JobBatchSizeDefault); err != nil && ctx.Err() == nil {
				s.log.LogAttrs(ctx, slog.LevelError, "idempotency cleanup failed", slog.Any("error", err))
			}
		}
	}
}

// Drain marks the server not ready (/readyz answers 503), so that a load
// balancer stops sending it requests before it shuts down.
func (s *Server) Drain() { s.draining.Store(true) }

// Stop stops the outbox workers (each finishes or abandons its attempts
// within ctx) and the jobs, and closes the authenticator New made. Call it
// after the HTTP server's Shutdown, so that in-flight requests finish
// first.
func (s *Server) Stop(ctx context.Context) error {
	s.Drain()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ownsAuth {
		s.auth.Close()
		s.ownsAuth = false
	}
	if !s.started {
		return nil
	}
	s.started = false
	var errs []error
	if s.publisher != nil {
		if err := s.publisher.Stop(ctx); err != nil {
			errs = append(errs, err)
		}
	}
	s.cancel()
	for _, w := range s.workers {
		if err := w.Stop(ctx); err != nil {
			errs = append(errs, err)
		}
	}
	select {
	case <-s.jobsDone:
	case <-ctx.Done():
		errs = append(errs, ctx.Err())
	}
	return errors.Join(errs...)
}

// Timeouts bound a connection's phases (http.Server's fields of the same
// names). Zero values take the defaults below.
type Timeouts struct {
	ReadHeader, Read, Write, Idle time.Duration
}

// Defaults of Timeouts.
const (
	ReadHeaderTimeoutDefault = 5 * time.Second
	ReadTimeoutDefault       = 30 * time.Second
	WriteTimeoutDefault      = 60 * time.Second
	IdleTimeoutDefault       = 120 * time.Second
)

// HTTPServer returns an http.Server for the handler with the timeouts t
// (defaults for zero fields) and the server's logger as its error log.
func (s *Server) HTTPServer(t Timeouts) *http.Server {
	def := func(d, v time.Duration) time.Duration {
		if d == 0 {
			return v
		}
		return d
	}
	return &http.Server{
		Handler:           s.handler,
		ReadHeaderTimeout: def(t.ReadHeader, ReadHeaderTimeoutDefault),
		ReadTimeout:       def(t.Read, ReadTimeoutDefault),
		WriteTimeout:      def(t.Write, WriteTimeoutDefault),
		IdleTimeout:       def(t.Idle, IdleTimeoutDefault),
		MaxHeaderBytes:    64 << 10,
		// OPTIONS * reaches the handler, which refuses it as a problem.
		DisableGeneralOptionsHandler: true,
		ErrorLog:                     slog.NewLogLogger(s.log.Handler(), slog.LevelWarn),
	}
}

// Serve runs the server on ln until ctx ends: Start, then HTTP until ctx
// is done, then a graceful shutdown within shutdownTimeout (in-flight
// requests finish; new connections are refused), then Stop. serve is
// hs.Serve or a TLS variant of it.
func (s *Server) Serve(ctx context.Context, hs *http.Server, ln net.Listener, shutdownTimeout time.Duration, serve func(net.Listener) error) error {
	if err := s.Start(ctx); err != nil {
		ln.Close()
		return err
	}
	if serve == nil {
		serve = hs.Serve
	}
	ln = Listener(ln)
	served := make(chan error, 1)
	go func() { served <- serve(ln) }()
	var serveErr error
	select {
	case serveErr = <-served:
	case <-ctx.Done():
	}
	s.Drain()
	shutdownCtx, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
	defer cancel()
	shutdownErr := hs.Shutdown(shutdownCtx)
	if serveErr == nil {
		if err := <-served; !errors.Is(err, http.ErrServerClosed) {
			serveErr = err
		}
	} else if errors.Is(serveErr, http.ErrServerClosed) {
		serveErr = nil
	}
	stopErr := s.Stop(shutdownCtx)
	return errors.Join(serveErr, shutdownErr, stopErr)
}
