// Extension points of ledgerctl.
//
// Every command lives in its own file, command_<name>.go, and registers itself
// from init without touching this file:
//
//	func init() { registerCommand(newStockCommand) }
//
//	func newStockCommand(a *app) *cobra.Command {
//		opts := stockOptions{}
//		cmd := &cobra.Command{Use: "stock", RunE: func(cmd *cobra.Command, args []string) error {
//			db, err := a.openDB(cmd.Context(), true) // read-only
//			if err != nil {
//				return err
//			}
//			defer db.Close()
//			…
//			return a.print(cmd, value, func(w io.Writer) error { … })
//		}}
//		return cmd
//	}
//
// The app holds the global flags (--db, -o, --lock-timeout, --socket, --log-level). Commands open the
// ledger with a.openDB (a missing file is an error that exits 5 and creates
// nothing) or a.createDB (for the few commands that may create it), print
// through a.print (JSON with -o json, else the text function), and return
// errors: errors.go is the one place that turns them into exit codes and
// JSON error codes. Commands must not call os.Exit or write to os.Stdout
// directly (tests run them in-process). Arguments or flags that cannot be
// parsed are reported with usageErrorf (exit 2), other bad input with
// invalidInputf (exit 2). Commands must not set PersistentPreRunE: the
// root's marks where usage checking ends.
//
// While `serve` holds a ledger file, the commands listed in operatorCommands
// (operator_client.go) run inside it through its operator socket
// (operator_server.go): there a.openDB returns a read-only ledger over the
// server's storage, or the server's own for operatorSharedCommands, which
// such a command closes with a.closeDB (withDB does). A new read-only
// command joins by its name in operatorCommands.
//
// Tests run a command line in-process with a fixed clock through the helpers
// of cli_test.go (newFileLedger, testLedgers for every backend, l.run,
// l.must, golden) and compare outputs with testdata/cli/*.golden
// (`go test ./cmd/ledgerctl -update` rewrites them).
//
// A domain package joins `ledgerctl verify` by registering its state check:
//
//	func init() { registerCheck("stock", stockmovement.Check) }
//
// and joins `ledgerctl demo` by registering steps (command_demo.go):
//
//	func init() { registerDemoStep(20, "stock receipts", demoStockReceipts) }
//
// Demo step orders: 10–19 raw entries, 20–29 stock, 30–39 financial,
// 40–59 valuations, 90 the final verification and summary.

package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"
	"go.opentelemetry.io/otel/trace"

	"github.com/ledgerworks/ledger/chain"
)

// Environment and defaults of the global options.
const (
	// databaseEnvironment names the variable that gives the ledger when --db
	// is not set.
	databaseEnvironment = "LEDGER_DB"
	// databaseDefault is the ledger when neither --db nor LEDGER_DB is set.
	databaseDefault = "./ledger.db"
	// lockTimeoutDefault is how long a command waits for a file that another
	// process holds.
	lockTimeoutDefault = 10 * time.Second
	// lockTimeoutMax bounds --lock-timeout.
	lockTimeoutMax = time.Hour
)

// Output formats of -o.
const (
	outputText = "text"
	outputJSON = "json"
)

// Levels of --log-level. The engine logs operating failures it also returns
// (a failed group commit); they are off by default so that stderr holds
// exactly one error line, or one JSON object with -o json.
const (
	logLevelOff   = "off"
	logLevelError = "error"
	logLevelWarn  = "warn"
	logLevelInfo  = "info"
	logLevelDebug = "debug"
)

// logLevels maps --log-level values to slog levels.
var logLevels = map[string]slog.Level{
	logLevelError: slog.LevelError,
	logLevelWarn:  slog.LevelWarn,
	logLevelInfo:  slog.LevelInfo,
	logLevelDebug: slog.LevelDebug,
}

// app holds the global options and what the commands share. Tests build one
// with a fixed clock.
type app struct {
	// Global flags.
	database    string
	output      string
	lockTimeout time.Duration
	logLevel    string

	// stderr receives the engine's logs when --log-level asks for them.
	stderr io.Writer

	// clock stamps new entries; time.Now when nil.
	clock func() time.Time
	// metrics receives the engine's counters (serve sets it); none when nil.
	metrics chain.Metrics
	// tracerProvider receives the engine's spans (serve sets it when the
	// OTEL_* variables ask for an exporter); none when nil.
	tracerProvider trace.TracerProvider
	// environment reads variables (os.Getenv unless a test replaces it).
	environment func(string) string
	// serveWrap, when set, wraps serve's HTTP handler. Only tests set it:
	// the console's browser tests hold a request in flight with it.
	serveWrap func(http.Handler) http.Handler
	// serveRouteHook, when set, is server.Options.RouteHook. Only tests
	// set it: they hold a request inside the replay guard with it.
	serveRouteHook func(routeID string, next http.Handler) http.Handler
	// reachedRun is set once flags and arguments parsed, so that errors
	// before it are reported as usage errors.
	reachedRun bool

	// socket is --socket: the operator socket serve listens on and the
	// operator commands go through (operator_server.go).
	socket string
	// host is set when the command runs inside a server, through its
	// operator socket: the ledger is the server's.
	host *operatorHost
	// hostShared gives a command run through the socket the server's own
	// handle (operatorSharedCommands).
	hostShared bool
	// fromEnvironment maps the flags serve took from the environment to
	// their variables, for its error messages.
	fromEnvironment map[string]string
}

// newApp returns an app reading the real environment and clock.
func newApp() *app {
	return &app{environment: os.Getenv}
}

var (
	registryMutex sync.Mutex
	builders      []func(a *app) *cobra.Command
	checks        []registeredCheck
)

// registeredCheck is a domain package's derived-state check.
type registeredCheck struct {
	name  string
	check func(ctx context.Context, db *chain.DB) ([]chain.Failure, error)
}

// registerCommand adds a command to every root command built afterwards. Call
// it from init in the command's own file.
func registerCommand(build func(a *app) *cobra.Command) {
	registryMutex.Lock()
	defer registryMutex.Unlock()
	builders = append(builders, build)
}

// registerCheck adds a derived-state check that `verify` runs (on a database,
// when no chain is named) and whose failures it reports beside the chains'.
func registerCheck(name string, check func(ctx context.Context, db *chain.DB) ([]chain.Failure, error)) {
	registryMutex.Lock()
	defer registryMutex.Unlock()
	checks = append(checks, registeredCheck{name: name, check: check})
}

// registeredChecks returns the checks in name order.
func registeredChecks() []registeredCheck {
	registryMutex.Lock()
	defer registryMutex.Unlock()
	sorted := slices.Clone(checks)
	slices.SortFunc(sorted, func(a, b registeredCheck) int { return strings.Compare(a.name, b.name) })
	return sorted
}

// newRootCommand builds the command tree for one run.
func newRootCommand(a *app) *cobra.Command {
	root := &cobra.Command{
		Use:   "ledgerctl",
		Short: "Inspect, verify, export and import hash-chained ledgers",
		Long: "ledgerctl reads and writes a ledger: hash-chained, append-only entries with idempotent appends.\n" +
			"The ledger is a bbolt file (--db PATH) or a PostgreSQL database (--db postgres://…).",
		SilenceErrors: true,
		SilenceUsage:  true,
		PersistentPreRunE: func(cmd *cobra.Command, args []string) error {
			a.reachedRun = true
			if err := a.checkGlobalOptions(); err != nil {
				return err
			}
			if err := checkStandardOutput(a.databaseName(), cmd.OutOrStdout()); err != nil {
				return err
			}
			return a.routeOperatorCommand(cmd)
		},
	}
	var version bool
	root.Flags().BoolVar(&version, "version", false, "print this build's version (as ledgerctl version)")
	root.RunE = func(cmd *cobra.Command, args []string) error {
		if version {
			return a.printVersion(cmd)
		}
		return cmd.Help()
	}
	root.PersistentFlags().StringVar(&a.database, "db", "",
		"ledger file, or postgres:// URL (default $"+databaseEnvironment+", else "+databaseDefault+")")
	markSecret(root.PersistentFlags().Lookup("db"))
	root.PersistentFlags().StringVarP(&a.output, "output", "o", outputText, "output format: text or json")
	root.PersistentFlags().DurationVar(&a.lockTimeout, "lock-timeout", lockTimeoutDefault,
		"how long to wait for a ledger file another process holds")
	root.PersistentFlags().StringVar(&a.socket, "socket", "",
		"operator socket of a running serve (default $"+socketEnvironment+", else the ledger file's path + "+operatorSocketSuffix+"; "+operatorSocketOff+": none)")
	root.PersistentFlags().StringVar(&a.logLevel, "log-level", logLevelOff,
		"engine logs on stderr: off, error, warn, info or debug (JSON lines with -o json)")
	root.SetFlagErrorFunc(func(cmd *cobra.Command, err error) error {
		return &usageError{err: err}
	})
	registryMutex.Lock()
	build := slices.Clone(builders)
	registryMutex.Unlock()
	for _, b := range build {
		root.AddCommand(b(a))
	}
	return root
}

// checkGlobalOptions validates the global flags once they are parsed.
func (a *app) checkGlobalOptions() error {
	if a.output != outputText && a.output != outputJSON {
		return usageErrorf("-o %q: want %s or %s", a.output, outputText, outputJSON)
	}
	if a.lockTimeout < 0 || a.lockTimeout > lockTimeoutMax {
		return usageErrorf("--lock-timeout %v: want 0 to %v", a.lockTimeout, lockTimeoutMax)
	}
	if _, ok := logLevels[a.logLevel]; !ok && a.logLevel != logLevelOff {
		return usageErrorf("--log-level %q: want off, error, warn, info or debug", a.logLevel)
	}
	return nil
}

// logger returns the engine's logger: silent unless --log-level asks for
// logs, which then go to stderr as text, or as JSON lines with -o json.
// Never slog.Default: its lines would break the one-error-per-run contract
// of stderr.
func (a *app) logger() *slog.Logger {
	level, ok := logLevels[a.logLevel]
	if !ok || a.stderr == nil {
		return slog.New(slog.DiscardHandler)
	}
	options := &slog.HandlerOptions{Level: level}
	if a.output == outputJSON {
		return slog.New(slog.NewJSONHandler(a.stderr, options))
	}
	return slog.New(slog.NewTextHandler(a.stderr, options))
}

// databaseName is the ledger the command works on: --db, else $LEDGER_DB,
// else ./ledger.db.
func (a *app) databaseName() string {
	if a.database != "" {
		return a.database
	}
	if a.environment != nil {
		if v := a.environment(databaseEnvironment); v != "" {
			return v
		}
	}
	return databaseDefault
}

// options returns the engine options the commands share.
func (a *app) options(readOnly bool) chain.Options {
	timeout := a.lockTimeout
	if timeout == 0 {
		timeout = -1 // the engine reads zero as its default; -1 is "do not wait"
	}
	return chain.Options{Clock: a.clock, LockTimeout: timeout, ReadOnly: readOnly, Logger: a.logger(), Metrics: a.metrics,
		TracerProvider: a.tracerProvider}
}

// openDB opens the existing ledger. A missing file is an error (exit 5) and
// nothing is created. readOnly opens the file under a shared lock, so
// several readers may run at once.
func (a *app) openDB(ctx context.Context, readOnly bool) (*chain.DB, error) {
	if a.host != nil {
		return a.host.open(a, readOnly)
	}
	name := a.databaseName()
	if isDatabaseURL(name) {
		db, _, err := a.openURL(ctx, name, readOnly, false)
		return db, err
	}
	info, err := os.Stat(name)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("ledger %s: %w (create it with `ledgerctl init`)", name, errLedgerMissing)
	}
	if err != nil {
		return nil, fmt.Errorf("ledger %s: %w", name, err)
	}
	if info.IsDir() {
		return nil, fmt.Errorf("ledger %s: %w: is a directory", name, errLedgerMissing)
	}
	db, err := chain.Open(name, a.options(readOnly))
	if err != nil {
		return nil, a.lockedHint(ctx, err)
	}
	return db, nil
}

// withDB opens the existing ledger, runs fn and closes the ledger; a failed
// close of a writable ledger is the command's error, since it can mean that
// what fn wrote is not checkpointed (see CLI.md, exit 5).
func (a *app) withDB(cmd *cobra.Command, readOnly bool, fn func(ctx context.Context, db *chain.DB) error) error {
	db, err := a.openDB(cmd.Context(), readOnly)
	if err != nil {
		return err
	}
	defer a.closeDB(db)
	if err := fn(cmd.Context(), db); err != nil {
		return err
	}
	return a.closeDB(db)
}

// createDB opens the ledger for writing, creating the file when it is
// missing. created reports whether it did.
func (a *app) createDB(ctx context.Context) (db *chain.DB, created bool, err error) {
	if a.host != nil {
		return nil, false, fmt.Errorf("ledger %s: %w: nothing is created through the operator socket", a.host.path, chain.ErrReadOnly)
	}
	name := a.databaseName()
	if isDatabaseURL(name) {
		return a.openURL(ctx, name, false, true)
	}
	_, statErr := os.Stat(name)
	created = errors.Is(statErr, fs.ErrNotExist)
	db, err = chain.Open(name, a.options(false))
	if err != nil {
		return nil, false, a.lockedHint(ctx, err)
	}
	return db, created, nil
}

// isDatabaseURL reports whether name is a PostgreSQL URL rather than a path.
func isDatabaseURL(name string) bool {
	return strings.HasPrefix(name, "postgres://") || strings.HasPrefix(name, "postgresql://")
}

// print writes value as one line of JSON with -o json, else calls text.
func (a *app) print(cmd *cobra.Command, value any, text func(w io.Writer) error) error {
	w := cmd.OutOrStdout()
	if a.output == outputJSON {
		return writeJSON(w, value)
	}
	return text(w)
}

// writeJSON writes value as one line of JSON, without HTML escaping.
func writeJSON(w io.Writer, value any) error {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	return enc.Encode(value)
}

// execute runs one command line and returns the process exit code. Errors
// are printed on stderr, as one line of text or, with -o json, as a JSON
// error object.
func execute(ctx context.Context, a *app, args []string, stdin io.Reader, stdout, stderr io.Writer) (exitCode int) {
	// A panic that escapes the store's own recovery can only come from a
	// damaged file: it ends as exit 5 with one line, not a trace.
	defer func() {
		if p := recover(); p != nil {
			exitCode = reportError(stderr, a.output == outputJSON || wantsJSON(args),
				fmt.Errorf("%w: unexpected failure reading the ledger: %v", chain.ErrCorrupt, p))
		}
	}()
	a.stderr = stderr
	root := newRootCommand(a)
	root.SetArgs(args)
	root.SetIn(stdin)
	root.SetOut(stdout)
	root.SetErr(stderr)
	err := root.ExecuteContext(ctx)
	if err == nil {
		return exitSuccess
	}
	if remote := (*remoteExit)(nil); errors.As(err, &remote) {
		return remote.code // the server's run printed its output and error
	}
	asJSON := a.output == outputJSON
	if !a.reachedRun {
		var usage *usageError
		if !errors.As(err, &usage) {
			err = &usageError{err: err}
		}
		// The flags may not have been parsed (an unknown command).
		asJSON = asJSON || wantsJSON(args)
	}
	return reportError(stderr, asJSON, err)
}

// wantsJSON reports whether a command line asks for JSON output, for errors
// found before its flags are parsed.
func wantsJSON(args []string) bool {
	for i, arg := range args {
		switch arg {
		case "--":
			return false
		case "-o", "--output":
			if i+1 < len(args) && args[i+1] == outputJSON {
				return true
			}
		case "-o" + outputJSON, "-o=" + outputJSON, "--output=" + outputJSON:
			return true
		}
	}
	return false
}
