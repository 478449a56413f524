// Command cluster measures several `ledgerctl serve` processes sharing one
// PostgreSQL against one process, and one process against a bare
// `INSERT … ON CONFLICT DO NOTHING` per request, in one run: raw appends
// and purchase receipts.
//
//	go run ./bench/cluster -db postgres://… -servers 1,3 -clients 32,64
//
// Every round starts its servers afresh on a new schema, drives them over
// HTTP with keyed raw appends spread over -chains chains (each request a
// new Idempotency-Key, sent to the servers in turn) for -duration after
// -warmup, and counts the answers by status class. Rounds alternate
// between the server counts, -rounds times, so that the machine's noise
// falls on all of them alike; the table gives each figure, its baseline
// (the first server count, or the bare INSERT) and the ratio of the
// medians.
package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Limits of the flags.
const (
	serversMax = 16
	clientsMax = 1024
	chainsMax  = 1 << 16
	roundsMax  = 100
)

type config struct {
	db        string
	ledgerctl string
	servers   []int
	clients   []int
	chains    int
	rounds    int
	duration  time.Duration
	warmup    time.Duration
	bare      bool
	receipts  bool
	keepLogs  bool
	metrics   bool
	// connClient sends the servers' requests on connections of its own
	// (-http-client conn) instead of net/http's Transport.
	connClient bool
	// byChain sends each chain's requests to one server (-route chain), as
	// a load balancer hashing the chain would, so that no two servers
	// write one chain's head, instead of each request to the next server.
	byChain bool
}

func main() {
	var cfg config
	var servers, clients string
	flag.StringVar(&cfg.db, "db", os.Getenv("LEDGER_TEST_POSTGRES_URL"), "PostgreSQL URL (each round uses a new schema in it)")
	flag.StringVar(&cfg.ledgerctl, "ledgerctl", "", "ledgerctl binary (built from ./cmd/ledgerctl when empty)")
	flag.StringVar(&servers, "servers", "1,3", "server counts to compare, the first one the baseline")
	flag.StringVar(&clients, "clients", "32,64", "concurrent HTTP clients of each round")
	flag.IntVar(&cfg.chains, "chains", 8, "chains the appends are spread over")
	flag.IntVar(&cfg.rounds, "rounds", 2, "rounds of each configuration, alternated; the median is reported")
	flag.DurationVar(&cfg.duration, "duration", 10*time.Second, "measured time of a round")
	flag.DurationVar(&cfg.warmup, "warmup", 2*time.Second, "time before the measurement of a round")
	flag.BoolVar(&cfg.bare, "bare", true, "measure a bare INSERT … ON CONFLICT DO NOTHING per request beside one server")
	flag.BoolVar(&cfg.receipts, "receipts", true, "measure purchase receipts beside the raw appends, on as many servers")
	flag.BoolVar(&cfg.keepLogs, "keep-logs", false, "keep the servers' logs")
	httpClient := flag.String("http-client", "transport", "the load generator's HTTP client: transport (net/http's), or conn (a connection per client and server, each request written and its answer read in place: less of the shared CPU than the Transport's two goroutines a connection)")
	route := flag.String("route", "request", "how a request picks its server: request (the next server in turn, so that every server writes every chain) or chain (all of a chain's requests to one server, as a load balancer hashing the chain would)")
	flag.BoolVar(&cfg.metrics, "metrics", false, "serve the servers' metrics and report, for each round, where a request's time went (claim, group, commit)")
	flag.Parse()
	var err error
	if cfg.servers, err = parseCounts(servers, serversMax); err == nil {
		cfg.clients, err = parseCounts(clients, clientsMax)
	}
	if err == nil && (cfg.chains < 1 || cfg.chains > chainsMax || cfg.rounds < 1 || cfg.rounds > roundsMax || cfg.duration <= 0 || cfg.warmup < 0) {
		err = fmt.Errorf("-chains 1..%d, -rounds 1..%d, -duration > 0, -warmup >= 0", chainsMax, roundsMax)
	}
	switch *httpClient {
	case "transport":
	case "conn":
		cfg.connClient = true
	default:
		err = fmt.Errorf("-http-client %q: want transport or conn", *httpClient)
	}
	switch *route {
	case "request":
	case "chain":
		cfg.byChain = true
	default:
		err = fmt.Errorf("-route %q: want request or chain", *route)
	}
	if err == nil && cfg.db == "" {
		err = errors.New("-db (or LEDGER_TEST_POSTGRES_URL) is required")
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "cluster:", err)
		os.Exit(2)
	}
	if err := run(context.Background(), cfg); err != nil {
		fmt.Fprintln(os.Stderr, "cluster:", err)
		os.Exit(1)
	}
}

func parseCounts(s string, limit int) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 || n > limit {
			return nil, fmt.Errorf("%q: want counts from 1 to %d, comma-separated", s, limit)
		}
		out = append(out, n)
	}
	return out, nil
}

// result is one round's count of answers, and the CPU time spent during
// the measured time by the servers, their PostgreSQL backends and this
// load generator.
type result struct {
	ok, status4xx, status5xx, failed int64
	elapsed                          time.Duration
	cpu                              cpuTimes
	stages                           string // -metrics: where the time went
}

// cpuTimes is CPU time by the part of the setup that spent it.
type cpuTimes struct {
	serve, postgres, client time.Duration
}

// perRequest is d over the round's successful requests, in microseconds.
func (r result) perRequest(d time.Duration) float64 {
	if r.ok == 0 {
		return 0
	}
	return float64(d.Microseconds()) / float64(r.ok)
}

func (r result) perSecond() float64 { return float64(r.ok) / r.elapsed.Seconds() }

// figureID names one configuration: kind is rawKind, receiptsKind or
// bareKind (servers is then 0).
type figureID struct {
	kind             string
	servers, clients int
}

const (
	rawKind      = "raw appends"
	receiptsKind = "purchase receipts"
	bareKind     = "bare INSERT ON CONFLICT"
)

func (id figureID) String() string {
	if id.kind == bareKind {
		return fmt.Sprintf("%s, %d connections", id.kind, id.clients)
	}
	return fmt.Sprintf("%s, %d server(s), %d clients", id.kind, id.servers, id.clients)
}

// baseline is the configuration id is compared with: the first server
// count for the others, the bare INSERT for the first (when measured).
func (id figureID) baseline(cfg config) (figureID, bool) {
	switch {
	case id.kind == bareKind:
		return figureID{}, false
	case id.servers != cfg.servers[0]:
		return figureID{kind: id.kind, servers: cfg.servers[0], clients: id.clients}, true
	}
	return figureID{kind: bareKind, clients: id.clients}, cfg.bare
}

// figure gathers the rounds of one configuration.
type figure struct {
	results []result
}

func (f *figure) median() float64 {
	rates := make([]float64, len(f.results))
	for i, r := range f.results {
		rates[i] = r.perSecond()
	}
	slices.Sort(rates)
	return rates[len(rates)/2]
}

// cpu is the CPU time a request took over all rounds, by part.
func (f *figure) cpu() string {
	var sum result
	for _, r := range f.results {
		sum.ok += r.ok
		sum.cpu.serve += r.cpu.serve
		sum.cpu.postgres += r.cpu.postgres
		sum.cpu.client += r.cpu.client
	}
	total := sum.perRequest(sum.cpu.serve + sum.cpu.postgres + sum.cpu.client)
	return fmt.Sprintf("%.0f (%.0f + %.0f + %.0f)", total, sum.perRequest(sum.cpu.serve), sum.perRequest(sum.cpu.postgres), sum.perRequest(sum.cpu.client))
}

func (f *figure) errors() (c4, c5, failed int64) {
	for _, r := range f.results {
		c4 += r.status4xx
		c5 += r.status5xx
		failed += r.failed
	}
	return
}

func run(ctx context.Context, cfg config) error {
	dir, err := os.MkdirTemp("", "ledger-cluster-")
	if err != nil {
		return err
	}
	defer func() {
		if !cfg.keepLogs {
			os.RemoveAll(dir)
		} else {
			fmt.Println("logs in", dir)
		}
	}()
	if cfg.ledgerctl == "" {
		cfg.ledgerctl = filepath.Join(dir, "ledgerctl")
		build := exec.Command("go", "build", "-o", cfg.ledgerctl, "./cmd/ledgerctl")
		build.Stdout, build.Stderr = os.Stderr, os.Stderr
		if err := build.Run(); err != nil {
			return fmt.Errorf("go build ./cmd/ledgerctl (run from the module's root): %w", err)
		}
	}
	admin, err := pgxpool.New(ctx, cfg.db)
	if err != nil {
		return err
	}
	defer admin.Close()
	figures := map[figureID]*figure{}
	var order []figureID
	add := func(id figureID, r result) {
		f, ok := figures[id]
		if !ok {
			f = &figure{}
			figures[id] = f
			order = append(order, id)
		}
		f.results = append(f.results, r)
		fmt.Fprintf(os.Stderr, "%-44s %8.0f/s  5xx %d  4xx %d  failed %d  CPU µs/request: serve %.0f, PostgreSQL %.0f, client %.0f  (load %s)\n",
			id, r.perSecond(), r.status5xx, r.status4xx, r.failed, r.perRequest(r.cpu.serve), r.perRequest(r.cpu.postgres), r.perRequest(r.cpu.client), loadAverage())
		if r.stages != "" {
			fmt.Fprintf(os.Stderr, "%-44s %s\n", "", r.stages)
		}
	}
	for round := range cfg.rounds {
		for _, clients := range cfg.clients {
			for _, n := range cfg.servers {
				r, err := serverRound(ctx, cfg, admin, dir, round, n, clients, rawAppend, nil)
				if err != nil {
					return err
				}
				add(figureID{kind: rawKind, servers: n, clients: clients}, r)
			}
			for _, n := range cfg.servers {
				if !cfg.receipts {
					break
				}
				r, err := serverRound(ctx, cfg, admin, dir, round, n, clients, purchaseReceipt, receiptSetup)
				if err != nil {
					return err
				}
				add(figureID{kind: receiptsKind, servers: n, clients: clients}, r)
			}
			if cfg.bare {
				r, err := bareRound(ctx, cfg, admin, clients)
				if err != nil {
					return err
				}
				add(figureID{kind: bareKind, clients: clients}, r)
			}
		}
	}
	fmt.Printf("\n| figure | per second | baseline | baseline per second | ratio | CPU µs/request (serve + PostgreSQL + client) | 5xx | 4xx | failed |\n|---|---:|---|---:|---:|---:|---:|---:|---:|\n")
	for _, id := range order {
		f := figures[id]
		c4, c5, failed := f.errors()
		base, ok := id.baseline(cfg)
		b, measured := figures[base]
		if !ok || !measured {
			fmt.Printf("| %s | %.0f | | | | %s | %d | %d | %d |\n", id, f.median(), f.cpu(), c5, c4, failed)
			continue
		}
		fmt.Printf("| %s | %.0f | %s | %.0f | %.2f | %s | %d | %d | %d |\n", id, f.median(), base, b.median(), f.median()/b.median(), f.cpu(), c5, c4, failed)
	}
	fmt.Printf("\nload average at the end: %s\n", loadAverage())
	return nil
}

func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}

// schemaURL returns the URL with search_path set to schema, and the
// sessions named by it (application_name), so that the round finds its
// PostgreSQL backends.
func schemaURL(base, schema string) (string, error) {
	u, err := url.Parse(base)
	if err != nil {
		return "", err
	}
	q := u.Query()
	q.Set("search_path", schema)
	q.Set("application_name", schema)
	u.RawQuery = q.Encode()
	return u.String(), nil
}

func newSchema(ctx context.Context, admin *pgxpool.Pool) (string, error) {
	var b [6]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	return "benchcluster_" + hex.EncodeToString(b[:]), nil
}

func dropSchema(admin *pgxpool.Pool, schema string) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := admin.Exec(ctx, "DROP SCHEMA IF EXISTS "+pgx.Identifier{schema}.Sanitize()+" CASCADE"); err != nil {
		fmt.Fprintln(os.Stderr, "cluster: drop schema:", err)
	}
}

// request makes the HTTP request a client sends for its i-th operation.
type request func(base, token string, i int64, chains int) (*http.Request, error)

// rawBody is the body of every raw append: payload {"n":1}, as the bare
// INSERT's data.
const rawBody = `{"type":"load/v1","payload":"eyJuIjoxfQ=="}`

// rawAppend builds its request with as little work as the bare INSERT's
// client does for its statement: no formatting, the headers set in place.
func rawAppend(base, token string, i int64, chains int) (*http.Request, error) {
	r, err := http.NewRequest(http.MethodPost, base+"/v1/chains/load/"+strconv.FormatInt(i%int64(chains), 10)+"/entries", strings.NewReader(rawBody))
	if err != nil {
		return nil, err
	}
	r.Header["Idempotency-Key"] = []string{"raw-" + strconv.FormatInt(i, 10)}
	return authorized(r, token), nil
}

func purchaseReceipt(base, token string, i int64, chains int) (*http.Request, error) {
	body := fmt.Sprintf(`{"item":"item-%d","location":"main","quantity":"1","unit_cost":"8.25","date":"2026-11-02",`+
		`"inventory_account":"1400","credit_account":"2100"}`, i%int64(chains))
	r, err := http.NewRequest(http.MethodPost, base+"/v1/purchase-receipts", strings.NewReader(body))
	if err != nil {
		return nil, err
	}
	r.Header.Set("Idempotency-Key", fmt.Sprintf("receipt-%d", i))
	return authorized(r, token), nil
}

// jsonType is the Content-Type header of every request.
var jsonType = []string{"application/json"}

func authorized(r *http.Request, token string) *http.Request {
	r.Header["Authorization"] = []string{"Bearer " + token}
	r.Header["Content-Type"] = jsonType
	return r
}

// receiptSetup defines what the purchase receipts name: the items
// item-0… in both catalogs, the location main, the book main with EUR and
// its two accounts.
func receiptSetup(base, token string, chains int) error {
	steps := [][2]string{
		{"/v1/stock/locations", `{"id":"main"}`},
		{"/v1/fin/books/main/currencies", `{"code":"EUR","exponent":2}`},
		{"/v1/fin/books/main/accounts", `{"code":"1400","name":"Inventory","type":"asset"}`},
		{"/v1/fin/books/main/accounts", `{"code":"2100","name":"Goods received not invoiced","type":"liability"}`},
	}
	for i := range chains {
		steps = append(steps, [2]string{"/v1/stock/items", fmt.Sprintf(`{"id":"item-%d","scale":0}`, i)},
			[2]string{"/v1/val/items", fmt.Sprintf(`{"id":"item-%d","method":"moving_average","currency":"EUR","minor_unit":2}`, i)})
	}
	for i, st := range steps {
		r, err := http.NewRequest(http.MethodPost, base+st[0], strings.NewReader(st[1]))
		if err != nil {
			return err
		}
		r.Header.Set("Idempotency-Key", fmt.Sprintf("setup-%d", i))
		resp, err := http.DefaultClient.Do(authorized(r, token))
		if err != nil {
			return err
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode >= 300 {
			return fmt.Errorf("setup %s: %d %s", st[0], resp.StatusCode, body)
		}
	}
	return nil
}

// serverRound runs n servers on a new schema and drives them.
func serverRound(ctx context.Context, cfg config, admin *pgxpool.Pool, dir string, round, n, clients int, req request, setup func(base, token string, chains int) error) (result, error) {
	schema, err := newSchema(ctx, admin)
	if err != nil {
		return result{}, err
	}
	defer dropSchema(admin, schema)
	db, err := schemaURL(cfg.db, schema)
	if err != nil {
		return result{}, err
	}
	var out bytes.Buffer
	create := exec.CommandContext(ctx, cfg.ledgerctl, "--db", db, "-o", "json", "apikey", "create", "--tenant", "bench", "--scopes", "read,write")
	create.Stdout, create.Stderr = &out, os.Stderr
	if err := create.Run(); err != nil {
		return result{}, fmt.Errorf("apikey create: %w", err)
	}
	var key struct {
		Token string `json:"token"`
	}
	if err := json.Unmarshal(out.Bytes(), &key); err != nil || key.Token == "" {
		return result{}, fmt.Errorf("apikey create: no token in %q", out.String())
	}
	var bases []string
	probe := &cpuProbe{admin: admin, app: schema}
	for i := range n {
		log, err := os.Create(filepath.Join(dir, fmt.Sprintf("round%d-%dservers-%dclients-%d.log", round, n, clients, i)))
		if err != nil {
			return result{}, err
		}
		defer log.Close()
		args := []string{"--db", db, "--log-level", "error", "serve", "--addr", "127.0.0.1:0"}
		if cfg.metrics {
			args = append(args, "--metrics-addr", "127.0.0.1:0")
		}
		cmd := exec.Command(cfg.ledgerctl, args...)
		cmd.Stderr = log
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			return result{}, err
		}
		if err := cmd.Start(); err != nil {
			return result{}, err
		}
		probe.serve = append(probe.serve, cmd.Process.Pid)
		defer func() {
			cmd.Process.Signal(syscall.SIGTERM)
			cmd.Wait()
		}()
		lines := bufio.NewReader(stdout)
		line, err := lines.ReadString('\n')
		if err != nil {
			return result{}, fmt.Errorf("serve: no address (see %s): %w", log.Name(), err)
		}
		bases = append(bases, strings.TrimSpace(strings.TrimPrefix(line, "listening on ")))
		if cfg.metrics {
			line, err := lines.ReadString('\n')
			if err != nil || !strings.HasPrefix(line, "metrics on ") {
				return result{}, fmt.Errorf("serve: no metrics address (see %s): %q %v", log.Name(), line, err)
			}
			probe.metrics = append(probe.metrics, strings.TrimSpace(strings.TrimPrefix(line, "metrics on ")))
		}
	}
	if setup != nil {
		if err := setup(bases[0], key.Token, cfg.chains); err != nil {
			return result{}, err
		}
	}
	return drive(ctx, cfg, clients, probe, func(i int64) (*http.Request, error) {
		server := i
		if cfg.byChain {
			server = i % int64(cfg.chains) // the request's chain (rawAppend, purchaseReceipt)
		}
		return req(bases[server%int64(len(bases))], key.Token, i, cfg.chains)
	})
}

// drive runs clients goroutines sending requests until the warm-up and
// the measured time have passed, and counts the answers of the measured
// time.
func drive(ctx context.Context, cfg config, clients int, probe *cpuProbe, next func(i int64) (*http.Request, error)) (result, error) {
	if cfg.connClient {
		return driveConns(ctx, cfg, clients, probe, next)
	}
	transport := &http.Transport{MaxIdleConnsPerHost: clients, MaxConnsPerHost: clients}
	defer transport.CloseIdleConnections()
	hc := &http.Client{Transport: transport, Timeout: time.Minute}
	return measure(ctx, cfg, clients, probe, func(i int64) (int, error) {
		r, err := next(i)
		if err != nil {
			return 0, err
		}
		resp, err := hc.Do(r.WithContext(ctx))
		if err != nil {
			return 0, err
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode, nil
	})
}

// driveConns is drive with -http-client conn: each client goroutine keeps
// one connection to each server, writes a request on it and reads the
// answer, in its own goroutine. A connection that fails, or that the
// server closes, is dialed again for the next request.
func driveConns(ctx context.Context, cfg config, clients int, probe *cpuProbe, next func(i int64) (*http.Request, error)) (result, error) {
	type conn struct {
		c  net.Conn
		br *bufio.Reader
		bw *bufio.Writer
	}
	var mu sync.Mutex
	idle := map[string][]*conn{} // by host, the connections no client holds
	var all []*conn
	defer func() {
		for _, c := range all {
			c.c.Close()
		}
	}()
	take := func(host string) (*conn, error) {
		mu.Lock()
		if cs := idle[host]; len(cs) > 0 {
			c := cs[len(cs)-1]
			idle[host] = cs[:len(cs)-1]
			mu.Unlock()
			return c, nil
		}
		mu.Unlock()
		nc, err := (&net.Dialer{Timeout: 10 * time.Second}).DialContext(ctx, "tcp", host)
		if err != nil {
			return nil, err
		}
		c := &conn{c: nc, br: bufio.NewReader(nc), bw: bufio.NewWriter(nc)}
		mu.Lock()
		all = append(all, c)
		mu.Unlock()
		return c, nil
	}
	put := func(host string, c *conn) {
		mu.Lock()
		idle[host] = append(idle[host], c)
		mu.Unlock()
	}
	return measure(ctx, cfg, clients, probe, func(i int64) (int, error) {
		r, err := next(i)
		if err != nil {
			return 0, err
		}
		c, err := take(r.URL.Host)
		if err != nil {
			return 0, err
		}
		_ = c.c.SetDeadline(time.Now().Add(time.Minute))
		resp, err := func() (*http.Response, error) {
			if err := r.Write(c.bw); err != nil {
				return nil, err
			}
			if err := c.bw.Flush(); err != nil {
				return nil, err
			}
			return http.ReadResponse(c.br, r)
		}()
		if err != nil {
			c.c.Close()
			return 0, err
		}
		_, err = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if err != nil || resp.Close {
			c.c.Close()
		} else {
			put(r.URL.Host, c)
		}
		return resp.StatusCode, err
	})
}

// measure runs op from clients goroutines, numbering the operations, and
// counts the outcomes of those that start after the warm-up and before its
// end, and the CPU time the probe's processes spent meanwhile.
func measure(ctx context.Context, cfg config, clients int, probe *cpuProbe, op func(i int64) (status int, err error)) (result, error) {
	var (
		next               atomic.Int64
		ok, c4, c5, failed atomic.Int64
		measuring, stopped atomic.Bool
		wg                 sync.WaitGroup
		firstErr           atomic.Value
	)
	for range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for !stopped.Load() {
				counted := measuring.Load()
				status, err := op(next.Add(1))
				if !counted || stopped.Load() {
					continue
				}
				switch {
				case err != nil:
					failed.Add(1)
					firstErr.CompareAndSwap(nil, err.Error())
				case status >= 500:
					c5.Add(1)
				case status >= 400:
					c4.Add(1)
				default:
					ok.Add(1)
				}
			}
		}()
	}
	time.Sleep(cfg.warmup)
	before := probe.sample(ctx)
	measuring.Store(true)
	start := time.Now()
	time.Sleep(cfg.duration)
	stopped.Store(true)
	elapsed := time.Since(start)
	after := probe.sample(ctx)
	wg.Wait()
	if e := firstErr.Load(); e != nil {
		fmt.Fprintln(os.Stderr, "cluster: first failed request:", e)
	}
	return result{ok: ok.Load(), status4xx: c4.Load(), status5xx: c5.Load(), failed: failed.Load(), elapsed: elapsed,
		cpu: after.since(before), stages: stages(before.stages, after.stages)}, nil
}

// clockTicksPerSecond is the unit of the CPU times of /proc/PID/stat
// (USER_HZ, 100 on Linux).
const clockTicksPerSecond = 100

// cpuProbe reads the CPU time of a round's processes: the servers, by
// pid, and the PostgreSQL backends whose application_name is app, through
// /proc (so only when PostgreSQL runs on this machine; else they count 0).
type cpuProbe struct {
	admin *pgxpool.Pool
	app   string
	serve []int
	// metrics are the servers' metrics URLs (-metrics), whose stageSums
	// each sample adds up.
	metrics []string
}

// cpuSample is CPU time by pid, and this process's own; and the sums of
// the servers' stageSums.
type cpuSample struct {
	serve, postgres map[int]time.Duration
	client          time.Duration
	stages          map[string]float64
}

// stageSums are the metrics -metrics reads: the sums and counts of the
// request's duration, the guard's claim, and the group commit's duration
// and size.
var stageSums = []string{
	`ledger_http_request_duration_seconds_sum{route="POST /v1/chains/{name}/entries"}`,
	`ledger_http_request_duration_seconds_count{route="POST /v1/chains/{name}/entries"}`,
	`idempotency_store_duration_seconds_sum{op="create"}`,
	`idempotency_store_duration_seconds_count{op="create"}`,
	`ledger_group_commit_duration_seconds_sum`,
	`ledger_group_commit_duration_seconds_count`,
	`ledger_group_commit_requests_sum`,
}

// readStages adds the stageSums of the metrics page at url to sums.
func readStages(ctx context.Context, url string, sums map[string]float64) error {
	r, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(r)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %s", url, resp.Status)
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		i := strings.LastIndexByte(line, ' ') // a label's value may hold spaces
		if i < 0 || !slices.Contains(stageSums, line[:i]) {
			continue
		}
		name, value := line[:i], line[i+1:]
		v, err := strconv.ParseFloat(value, 64)
		if err != nil {
			return fmt.Errorf("%s: %s: %w", url, name, err)
		}
		sums[name] += v
	}
	return sc.Err()
}

// stages describes where the requests of a round spent their time, from
// the stageSums' growth over it (-metrics).
func stages(before, after map[string]float64) string {
	d := func(i int) float64 { return after[stageSums[i]] - before[stageSums[i]] }
	ms := func(sum, count int) string {
		if d(count) == 0 {
			return "-"
		}
		return fmt.Sprintf("%.1f ms", 1000*d(sum)/d(count))
	}
	if d(3) == 0 && d(5) == 0 {
		return ""
	}
	groupSize := 0.0
	if d(5) > 0 {
		groupSize = d(6) / d(5)
	}
	return fmt.Sprintf("raw append %s, claim %s, groups of %.1f requests, commit %s", ms(0, 1), ms(2, 3), groupSize, ms(4, 5))
}

func (p *cpuProbe) sample(ctx context.Context) cpuSample {
	out := cpuSample{serve: map[int]time.Duration{}, postgres: map[int]time.Duration{}, stages: map[string]float64{}}
	for _, u := range p.metrics {
		if err := readStages(ctx, u, out.stages); err != nil {
			fmt.Fprintln(os.Stderr, "cluster: metrics:", err)
		}
	}
	for _, pid := range p.serve {
		out.serve[pid] = processCPU(pid)
	}
	rows, err := p.admin.Query(ctx, "SELECT pid FROM pg_stat_activity WHERE application_name = $1", p.app)
	if err == nil {
		pids, err := pgx.CollectRows(rows, pgx.RowTo[int])
		if err != nil {
			fmt.Fprintln(os.Stderr, "cluster: backends:", err)
		}
		for _, pid := range pids {
			out.postgres[pid] = processCPU(pid)
		}
	} else {
		fmt.Fprintln(os.Stderr, "cluster: backends:", err)
	}
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err == nil {
		out.client = time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	return out
}

// since is the CPU time spent from before to s, by part. A process
// missing from before started meanwhile: all of its time counts.
func (s cpuSample) since(before cpuSample) cpuTimes {
	delta := func(now, then map[int]time.Duration) (d time.Duration) {
		for pid, t := range now {
			d += t - then[pid]
		}
		return d
	}
	return cpuTimes{serve: delta(s.serve, before.serve), postgres: delta(s.postgres, before.postgres), client: s.client - before.client}
}

// processCPU is the user and system time of process pid, 0 when it cannot
// be read.
func processCPU(pid int) time.Duration {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// The fields after the command name, which ends at the last ')':
	// state is the first, utime the 12th, stime the 13th.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 13 {
		return 0
	}
	utime, err1 := strconv.ParseInt(f[11], 10, 64)
	stime, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0
	}
	return time.Duration(utime+stime) * time.Second / clockTicksPerSecond
}

// bareRound measures one INSERT … ON CONFLICT DO NOTHING per request, each
// its own transaction, from clients goroutines over a pool of as many
// connections.
func bareRound(ctx context.Context, cfg config, admin *pgxpool.Pool, clients int) (result, error) {
	schema, err := newSchema(ctx, admin)
	if err != nil {
		return result{}, err
	}
	defer dropSchema(admin, schema)
	if _, err := admin.Exec(ctx, "CREATE SCHEMA "+schema+"; CREATE TABLE "+schema+".bare (chain_id text NOT NULL, idempotency_key text NOT NULL, data bytea NOT NULL, PRIMARY KEY (chain_id, idempotency_key))"); err != nil {
		return result{}, err
	}
	pc, err := pgxpool.ParseConfig(cfg.db)
	if err != nil {
		return result{}, err
	}
	pc.MaxConns, pc.MinConns = int32(clients), int32(clients)
	pc.ConnConfig.RuntimeParams["application_name"] = schema
	pool, err := pgxpool.NewWithConfig(ctx, pc)
	if err != nil {
		return result{}, err
	}
	defer pool.Close()
	insert := "INSERT INTO " + schema + ".bare (chain_id, idempotency_key, data) VALUES ($1, $2, $3) ON CONFLICT DO NOTHING"
	data := []byte(`{"n":1}`)
	return measure(ctx, cfg, clients, &cpuProbe{admin: admin, app: schema}, func(i int64) (int, error) {
		_, err := pool.Exec(ctx, insert, "load/"+strconv.FormatInt(i%int64(cfg.chains), 10), "raw-"+strconv.FormatInt(i, 10), data)
		if err != nil {
			return 0, err
		}
		return http.StatusCreated, nil
	})
}
