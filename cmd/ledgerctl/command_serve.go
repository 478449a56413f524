package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/spf13/cobra"
	"golang.org/x/time/rate"

	"github.com/ledgerworks/ledger/apikey"
	"github.com/ledgerworks/ledger/audit"
	"github.com/ledgerworks/ledger/chain"
	"github.com/ledgerworks/ledger/idempotency"
	"github.com/ledgerworks/ledger/idempotency/pgstore"
	"github.com/ledgerworks/ledger/internal/buildinfo"
	"github.com/ledgerworks/ledger/outbox"
	"github.com/ledgerworks/ledger/server"
	"github.com/ledgerworks/ledger/server/ratelimit"
	"github.com/ledgerworks/ledger/server/ratelimit/pgbuckets"
)

func init() { registerCommand(newServeCommand) }

// serveShutdownTimeoutDefault is how long in-flight requests get to finish
// after SIGINT or SIGTERM.
const serveShutdownTimeoutDefault = 30 * time.Second

// serveOptions are the flags of serve.
type serveOptions struct {
	addr, tlsCert, tlsKey, config string
	bodyLimit                     int64
	timeouts                      server.Timeouts
	shutdownTimeout               time.Duration
	ratePerKey, ratePerAddr       float64
	keyBurst, addrBurst           int
	idempotencyTTL, jobsInterval  time.Duration
	idempotencyLease              time.Duration
	keepOrphans                   bool
	outboxLease                   time.Duration
	metricsAddr                   string
	pprof                         bool
	checkpointKey                 string
	checkpointInterval            time.Duration
}

func newServeCommand(a *app) *cobra.Command {
	o := &serveOptions{}
	cmd := &cobra.Command{
		Use:   "serve [--addr HOST:PORT] [--config FILE] [--tls-cert FILE --tls-key FILE]",
		Short: "Serve the ledger over HTTP: raw entries, stock, financial, valuations, outbox, inbox (docs/SERVER.md)",
		Long: "serve answers the HTTP API of docs/SERVER.md on --addr until SIGINT or SIGTERM, then finishes the\n" +
			"requests in flight, stops its workers and closes the ledger. Its first line on stdout is\n" +
			"\"listening on http://ADDR\" (https with TLS), ADDR the bound address (--addr 127.0.0.1:0 picks a port).\n" +
			"Every request needs an API key (ledgerctl apikey create, before serve on an embedded ledger); every\n" +
			"state-changing route needs an Idempotency-Key. The access log goes to stderr (JSON lines with -o json).\n" +
			"--config names a JSON file of webhook providers and delivered outbox topics.\n" +
			"On a ledger file it also listens on the operator socket FILE.sock (--socket), through which\n" +
			"verify, chains, apikey list, backup and the other read-only commands run beside it (docs/OPERATIONS.md).\n" +
			"Every flag may also be set by its environment variable, LEDGER_ and the flag's name in capitals with\n" +
			"underscores (--rate-per-key: LEDGER_RATE_PER_KEY); a flag on the command line wins over its variable.\n" +
			"A secret may come from a file: LEDGER_DB_FILE names a file holding the database URL.",
		Args: noArgs,
		PreRunE: func(cmd *cobra.Command, args []string) error {
			if err := a.applyEnvironment(cmd); err != nil {
				return err
			}
			return a.checkGlobalOptions()
		},
		RunE: func(cmd *cobra.Command, args []string) error { return a.blameEnvironment(a.serve(cmd, o)) },
	}
	defaultHelp := cmd.HelpFunc()
	cmd.SetHelpFunc(func(c *cobra.Command, args []string) {
		environmentHelp(c)
		defaultHelp(c, args)
	})
	f := cmd.Flags()
	f.StringVar(&o.addr, "addr", "127.0.0.1:8080", "address to listen on")
	f.StringVar(&o.tlsCert, "tls-cert", "", "TLS certificate file (PEM); serves HTTPS with --tls-key")
	f.StringVar(&o.tlsKey, "tls-key", "", "TLS private key file (PEM)")
	f.StringVar(&o.config, "config", "", "JSON file of webhook providers and outbox deliveries")
	f.Int64Var(&o.bodyLimit, "body-limit", server.BodySizeMaxDefault, "largest request body in bytes (413 PAYLOAD_TOO_LARGE)")
	f.DurationVar(&o.timeouts.ReadHeader, "read-header-timeout", server.ReadHeaderTimeoutDefault, "time to read a request's headers")
	f.DurationVar(&o.timeouts.Read, "read-timeout", server.ReadTimeoutDefault, "time to read a whole request")
	f.DurationVar(&o.timeouts.Write, "write-timeout", server.WriteTimeoutDefault, "time to write a response")
	f.DurationVar(&o.timeouts.Idle, "idle-timeout", server.IdleTimeoutDefault, "how long an idle keep-alive connection stays open")
	f.DurationVar(&o.shutdownTimeout, "shutdown-timeout", serveShutdownTimeoutDefault, "time in-flight requests get at shutdown")
	f.Float64Var(&o.ratePerKey, "rate-per-key", 0, "requests a second per API key (token bucket; 0: no limit)")
	f.IntVar(&o.keyBurst, "rate-key-burst", 0, "burst per API key (default: the rate, at least 1)")
	f.Float64Var(&o.ratePerAddr, "rate-per-addr", 0, "requests a second per client address (0: no limit)")
	f.IntVar(&o.addrBurst, "rate-addr-burst", 0, "burst per client address (default: the rate, at least 1)")
	f.DurationVar(&o.idempotencyTTL, "idempotency-ttl", idempotency.TTLDefault, "how long a finished request is replayed")
	f.DurationVar(&o.idempotencyLease, "idempotency-lease", server.IdempotencyLeaseDefault, "how long a request's key stays held without its heartbeat (extended every third of it while the request runs)")
	f.DurationVar(&o.jobsInterval, "jobs-interval", server.JobsIntervalDefault, "how often idempotency records whose lease ended are recovered (expired ones are purged at most every minute)")
	f.BoolVar(&o.keepOrphans, "keep-orphan-leases", false, "do not release outbox leases at start (always kept on PostgreSQL)")
	f.StringVar(&o.metricsAddr, "metrics-addr", "", "address of a listener of its own for GET /metrics, unauthenticated (default: metrics not served)")
	f.BoolVar(&o.pprof, "pprof", false, "also serve the Go runtime's profiles (net/http/pprof, /debug/pprof/) on --metrics-addr's listener")
	f.DurationVar(&o.outboxLease, "outbox-lease", 0, "lease of the delivering outbox workers (default: 1.5 x the longest delivery timeout, at least 30s)")
	f.StringVar(&o.checkpointKey, "checkpoint-key", "", "sign checkpoints with this key file (ledgerctl keygen) and serve entry proofs against the newest")
	f.DurationVar(&o.checkpointInterval, "checkpoint-interval", server.CheckpointIntervalDefault, "how often a checkpoint is signed when the ledger changed")
	return cmd
}

func burst(b int, r float64) int {
	if b > 0 {
		return b
	}
	return max(1, int(r))
}

func (a *app) serve(cmd *cobra.Command, o *serveOptions) error {
	if (o.tlsCert == "") != (o.tlsKey == "") {
		return usageErrorf("%s: give both --tls-cert and --tls-key, or neither", cmd.CommandPath())
	}
	if o.bodyLimit < 1 || o.bodyLimit > server.BodySizeMaxLimit {
		return usageErrorf("--body-limit %d: want 1 to %d", o.bodyLimit, server.BodySizeMaxLimit)
	}
	if o.ratePerKey < 0 || o.ratePerAddr < 0 || o.shutdownTimeout <= 0 || o.idempotencyTTL <= 0 || o.jobsInterval <= 0 ||
		o.idempotencyLease <= 0 {
		return usageErrorf("%s: rates must not be negative; timeouts, the TTL, the lease and the interval must be positive", cmd.CommandPath())
	}
	if o.idempotencyLease > o.idempotencyTTL {
		return usageErrorf("--idempotency-lease %v: longer than --idempotency-ttl %v", o.idempotencyLease, o.idempotencyTTL)
	}
	if o.pprof && o.metricsAddr == "" {
		return usageErrorf("--pprof: serves on --metrics-addr's listener; give --metrics-addr too")
	}
	if o.outboxLease != 0 && (o.outboxLease < outbox.LeaseDurationMin || o.outboxLease > outbox.LeaseDurationMax) {
		return usageErrorf("--outbox-lease %v: want %v to %v", o.outboxLease, outbox.LeaseDurationMin, outbox.LeaseDurationMax)
	}
	var cfg server.Config
	if o.config != "" {
		var err error
		if cfg, err = server.ReadConfig(o.config); err != nil {
			return invalidInputf("%w", err)
		}
	}
	var signerKey string
	if o.checkpointKey != "" {
		if o.checkpointInterval < audit.IntervalMin {
			return usageErrorf("--checkpoint-interval %v: want at least %v", o.checkpointInterval, audit.IntervalMin)
		}
		var err error
		if signerKey, err = readKeyFile(o.checkpointKey, "--checkpoint-key", signingKey); err != nil {
			return err
		}
	}
	var tlsConfig *tls.Config
	if o.tlsCert != "" {
		pair, err := tls.LoadX509KeyPair(o.tlsCert, o.tlsKey)
		if err != nil {
			return invalidInputf("--tls-cert/--tls-key: %w", err)
		}
		tlsConfig = &tls.Config{Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS12}
	}
	ctx := cmd.Context()
	registry := prometheus.NewRegistry()
	registry.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	a.metrics = server.NewEngineMetrics(registry)
	logger := a.serveLogger()
	logVersion(logger)
	tp, flush, err := a.serveTracing(ctx)
	if err != nil {
		return err
	}
	if tp != nil {
		a.tracerProvider = tp
		defer func() { _ = flush(context.WithoutCancel(ctx)) }()
	}
	db, _, err := a.createDB(ctx)
	if err != nil {
		return err
	}
	defer db.Close()
	name := a.databaseName()
	if err := hintFirstKey(ctx, logger, db, name); err != nil {
		return err
	}
	opts := server.Options{DB: db, Registry: registry, Logger: logger, BodySizeMax: o.bodyLimit,
		IdempotencyTTL: o.idempotencyTTL, IdempotencyLease: o.idempotencyLease, JobsInterval: o.jobsInterval, Providers: cfg.Providers, Deliveries: cfg.Deliveries,
		OutboxLease:    o.outboxLease,
		ReleaseOrphans: !o.keepOrphans && !isDatabaseURL(name), Clock: a.clock,
		CheckpointSignerKey: signerKey, CheckpointInterval: o.checkpointInterval, RouteHook: a.serveRouteHook,
		RateLimit: ratelimit.Options{PerKey: rate.Limit(o.ratePerKey), KeyBurst: burst(o.keyBurst, o.ratePerKey),
			PerAddr: rate.Limit(o.ratePerAddr), AddrBurst: burst(o.addrBurst, o.ratePerAddr)},
		TracerProvider: a.tracerProvider}
	if isDatabaseURL(name) {
		// The guard's SUCCESS records commit in the entries' transactions.
		store, err := pgstore.Open(ctx, name, pgstore.Options{Migrate: true, Ledger: db, TracerProvider: a.tracerProvider})
		if err != nil {
			return err
		}
		defer store.Close()
		opts.IdempotencyStore = store
		if o.ratePerKey > pgbuckets.RateMax || o.ratePerAddr > pgbuckets.RateMax {
			return usageErrorf("%s: rates above %d a second cannot be shared on PostgreSQL", cmd.CommandPath(), pgbuckets.RateMax)
		}
		if o.ratePerKey > 0 || o.ratePerAddr > 0 {
			// The buckets are shared by every instance on the database.
			buckets, err := pgbuckets.Open(ctx, name, pgbuckets.Options{Migrate: true})
			if err != nil {
				return err
			}
			defer buckets.Close()
			opts.RateLimit.Store = buckets
		}
	}
	srv, err := server.New(opts)
	var de *server.DeliveryError
	if errors.As(err, &de) { // a delivery --outbox-lease cannot carry
		return invalidInputf("%w", err)
	}
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", o.addr)
	if err != nil {
		return invalidInputf("--addr %s: %w", o.addr, err)
	}
	hs := srv.HTTPServer(o.timeouts)
	if a.serveWrap != nil {
		hs.Handler = a.serveWrap(hs.Handler)
	}
	scheme, serve := "http", hs.Serve
	if tlsConfig != nil {
		hs.TLSConfig = tlsConfig
		scheme = "https"
		serve = func(ln net.Listener) error { return hs.ServeTLS(ln, "", "") }
	}
	operator, err := a.startOperatorSocket(db, opts.Logger)
	if err != nil {
		ln.Close()
		return err
	}
	defer operator.stop(context.Background())
	address := fmt.Sprintf("%s://%s", scheme, ln.Addr())
	if err := a.printServeLine(cmd, serveLineJSON{Event: "listening", Address: address}, "listening on "+address); err != nil {
		ln.Close()
		return err
	}
	if o.metricsAddr != "" {
		stop, err := serveMetrics(cmd, srv, o.metricsAddr, o.pprof)
		if err != nil {
			ln.Close()
			return err
		}
		defer stop()
	}
	if err := srv.Serve(ctx, hs, ln, o.shutdownTimeout, serve); err != nil {
		return err
	}
	stopCtx, cancel := context.WithTimeout(context.Background(), o.shutdownTimeout)
	operator.stop(stopCtx) // the commands in flight end before the ledger closes
	cancel()
	if err := db.Close(); err != nil {
		return err
	}
	return a.printServeLine(cmd, serveLineJSON{Event: "stopped", Detail: serveStoppedDetail}, "stopped: "+serveStoppedDetail)
}

// serveProfileSecondsMax is the longest CPU profile or trace --pprof
// serves (?seconds=).
const serveProfileSecondsMax = 60

// serveStoppedDetail is what a clean stop did.
const serveStoppedDetail = "in-flight requests finished, workers stopped, ledger closed"

// serveLineJSON is serve's first and last line on stdout with -o json.
type serveLineJSON struct {
	Event   string `json:"event"` // listening or stopped
	Address string `json:"address,omitempty"`
	Detail  string `json:"detail,omitempty"`
}

// printServeLine prints one of serve's stdout lines: text, or one JSON
// object with -o json.
func (a *app) printServeLine(cmd *cobra.Command, line serveLineJSON, text string) error {
	return a.print(cmd, line, func(w io.Writer) error {
		_, err := fmt.Fprintln(w, text)
		return err
	})
}

// logVersion is serve's first log line: which build serves.
func logVersion(logger *slog.Logger) {
	v := buildinfo.Get()
	attrs := []any{"version", v.Version}
	if v.VCSRevision != "" {
		attrs = append(attrs, "revision", v.VCSRevision, "revision_time", v.VCSTime)
	}
	attrs = append(attrs, "go", v.GoVersion, "format", v.Format, "file_format", v.FileFormat, "postgres_schema", v.PostgresSchema)
	logger.Info("ledgerctl serve", attrs...)
}

// hintFirstKey logs, when the ledger holds no valid API key, that every
// request will be refused and the command that creates the first key.
func hintFirstKey(ctx context.Context, logger *slog.Logger, db *chain.DB, name string) error {
	keys, err := apikey.List(ctx, db, "")
	if err != nil {
		return err
	}
	for _, k := range keys {
		if !k.Revoked() {
			return nil
		}
	}
	shown := name
	if isDatabaseURL(name) {
		shown = redactURL(name)
	}
	command := "ledgerctl --db " + shellQuote(shown) + " apikey create --tenant default --scopes read,write,admin"
	if isDatabaseURL(name) {
		logger.Warn("no API key: every request is refused with 401 until one exists; create one now with: " + command)
	} else {
		logger.Warn("no API key: every request is refused with 401 until one exists; stop the server (it holds the file), " +
			"then create one with: " + command)
	}
	return nil
}

// serveMetrics serves the server's metrics on a listener of its own at
// addr, prints "metrics on http://ADDR", and returns the function that
// closes it. The listener has no API key: bind it where only the scraper
// reaches it. With profiles, it serves net/http/pprof's pages under
// /debug/pprof/ too.
func serveMetrics(cmd *cobra.Command, srv *server.Server, addr string, profiles bool) (func(), error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, invalidInputf("--metrics-addr %s: %w", addr, err)
	}
	handler, writeTimeout := srv.MetricsHandler(), server.MetricsScrapeTimeout+5*time.Second
	if profiles {
		mux := http.NewServeMux()
		mux.Handle("/", handler)
		mux.HandleFunc("GET /debug/pprof/", pprof.Index)
		mux.HandleFunc("GET /debug/pprof/cmdline", pprof.Cmdline)
		mux.HandleFunc("GET /debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("GET /debug/pprof/symbol", pprof.Symbol)
		mux.HandleFunc("GET /debug/pprof/trace", pprof.Trace)
		// A CPU profile or a trace answers after its ?seconds=, which
		// must be within the write timeout.
		handler, writeTimeout = mux, serveProfileSecondsMax*time.Second+5*time.Second
	}
	ms := &http.Server{Handler: handler, ReadHeaderTimeout: server.ReadHeaderTimeoutDefault,
		ReadTimeout: server.ReadTimeoutDefault, WriteTimeout: writeTimeout, IdleTimeout: server.IdleTimeoutDefault}
	if _, err := fmt.Fprintf(cmd.OutOrStdout(), "metrics on http://%s/metrics\n", ln.Addr()); err != nil {
		ln.Close()
		return nil, err
	}
	go func() { _ = ms.Serve(ln) }()
	return func() { ms.Close() }, nil
}

// serveLogger is the access and worker log: stderr at info (or
// --log-level), JSON lines with -o json.
func (a *app) serveLogger() *slog.Logger {
	level := slog.LevelInfo
	if l, ok := logLevels[a.logLevel]; ok {
		level = l
	}
	opts := &slog.HandlerOptions{Level: level}
	if a.output == outputJSON {
		return slog.New(slog.NewJSONHandler(a.stderr, opts))
	}
	return slog.New(slog.NewTextHandler(a.stderr, opts))
}
