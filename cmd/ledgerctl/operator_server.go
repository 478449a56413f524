package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/ledgerworks/ledger/chain"
	"github.com/ledgerworks/ledger/storage"
	"github.com/ledgerworks/ledger/storage/bolt"
)

// The operator socket: `serve` on a ledger file listens on a Unix socket
// beside it (<file>.sock, mode 0600), and the read-only commands of
// operatorCommands, checkpoint and backup, which cannot open a file the
// server holds, run through it inside the server, on its own handle. The
// file's permissions are the authentication: whoever may connect is the
// server's user (or root), who could read the ledger file anyway. Nothing
// of the HTTP API reaches it, so a tenant never runs a whole-file check.
const (
	// operatorSocketSuffix names the default socket from the ledger file.
	operatorSocketSuffix = ".sock"
	// operatorSocketOff is the --socket value that turns the socket off.
	operatorSocketOff = "off"
	// operatorSocketMode is the socket's permission.
	operatorSocketMode fs.FileMode = 0o600
	// operatorSocketPathMax is the longest path a Unix socket can have.
	operatorSocketPathMax = 107
	// operatorRequestBytesMax bounds a request's body: room for verify's
	// expectHeadsMax heads of the longest chain names.
	operatorRequestBytesMax = 8 << 20
	// operatorArgsMax bounds the arguments of one command: verify's
	// expectHeadsMax heads, flag and value apart, and more.
	operatorArgsMax = 2*expectHeadsMax + 1024
	// operatorContentType is the type of the framed answers.
	operatorContentType = "application/vnd.ledger.operator-frames"
)

// operatorRequest is the body of POST /v1/run and POST /v1/backup.
type operatorRequest struct {
	// Args is the command line after "ledgerctl", without --db or --socket.
	Args []string `json:"args,omitempty"`
	// DB is the ledger the client named, as an absolute path; the server
	// refuses a request for another file. "" stands for the server's.
	DB string `json:"db,omitempty"`
	// JSON asks backup for errors as JSON (as -o json).
	JSON bool `json:"json,omitempty"`
}

// operatorHost is what a command run through the socket works on: the
// serving process's ledger.
type operatorHost struct {
	db   *chain.DB
	path string // the ledger file as serve named it
}

// borrowedBackend hands a read-only chain.DB the server's backend without
// letting it close it.
type borrowedBackend struct{ storage.Backend }

func (borrowedBackend) Close() error { return nil }

// open returns the ledger a command opened through the socket reads: a
// read-only DB over the server's backend, or, for operatorSharedCommands,
// the server's own DB, which closeDB leaves open.
func (h *operatorHost) open(a *app, readOnly bool) (*chain.DB, error) {
	if a.hostShared {
		return h.db, nil
	}
	if !readOnly {
		return nil, fmt.Errorf("ledger %s: %w: this command does not write through the operator socket", h.path, chain.ErrReadOnly)
	}
	return chain.OpenBackend(borrowedBackend{h.db.Backend()}, a.options(true))
}

// closeDB closes a ledger a command opened, except the server's own.
func (a *app) closeDB(db *chain.DB) error {
	if a.host != nil && db == a.host.db {
		return nil
	}
	return db.Close()
}

// operatorServer is the socket's listener and its HTTP server.
type operatorServer struct {
	host   *operatorHost
	path   string
	hs     *http.Server
	ln     *net.UnixListener
	cancel context.CancelFunc
	wg     sync.WaitGroup
	once   sync.Once
	log    *slog.Logger
}

// operatorSocketPath returns where serve listens and whether --socket (or
// LEDGER_SOCKET) named it; "" when the socket is off or the ledger is not a
// file.
func (a *app) operatorSocketPath() (path string, explicit bool) {
	socket := a.socket
	if socket == "" && a.environment != nil {
		socket = a.environment(socketEnvironment)
	}
	switch {
	case socket == operatorSocketOff:
		return "", false
	case socket != "":
		return socket, true
	case isDatabaseURL(a.databaseName()):
		return "", false
	}
	return a.databaseName() + operatorSocketSuffix, false
}

// startOperatorSocket listens on the operator socket of db. A default path
// that cannot be used (too long, a folder without write permission) is
// logged and skipped; a path named with --socket must work.
func (a *app) startOperatorSocket(db *chain.DB, logger *slog.Logger) (*operatorServer, error) {
	path, explicit := a.operatorSocketPath()
	if path == "" || isDatabaseURL(a.databaseName()) {
		return nil, nil // commands reach a PostgreSQL ledger beside its servers
	}
	ln, err := listenOperatorSocket(path)
	if err != nil {
		if explicit {
			return nil, invalidInputf("--socket %s: %w", path, err)
		}
		logger.Warn("no operator socket: operator commands need the server stopped", "socket", path, "error", err)
		return nil, nil
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &operatorServer{host: &operatorHost{db: db, path: a.databaseName()}, path: path, ln: ln, cancel: cancel, log: logger}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/run", s.run)
	mux.HandleFunc("POST /v1/backup", s.backup)
	s.hs = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second,
		BaseContext: func(net.Listener) context.Context { return ctx }}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		if err := s.hs.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			logger.Error("operator socket stopped", "socket", path, "error", err)
		}
	}()
	logger.Info("operator socket", "socket", path)
	return s, nil
}

// listenOperatorSocket listens on path with mode 0600 from the start: it
// binds a short temporary name in the same folder, sets the mode and
// renames it into place. A socket left at path by a process that ended is
// replaced; one that answers is not.
func listenOperatorSocket(path string) (*net.UnixListener, error) {
	if len(path) > operatorSocketPathMax {
		return nil, fmt.Errorf("a Unix socket path has at most %d bytes, this one %d", operatorSocketPathMax, len(path))
	}
	if info, err := os.Lstat(path); err == nil {
		if info.Mode().Type() != fs.ModeSocket {
			return nil, fmt.Errorf("%s exists and is not a socket", path)
		}
		if conn, err := net.DialTimeout("unix", path, time.Second); err == nil {
			conn.Close()
			return nil, fmt.Errorf("another process answers on %s", path)
		}
		if err := os.Remove(path); err != nil {
			return nil, err
		}
	}
	var random [3]byte
	_, _ = rand.Read(random[:])
	temporary := filepath.Join(filepath.Dir(path), ".s"+hex.EncodeToString(random[:]))
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: temporary, Net: "unix"})
	if err != nil {
		return nil, err
	}
	ln.SetUnlinkOnClose(false)
	if err := os.Chmod(temporary, operatorSocketMode); err != nil {
		ln.Close()
		os.Remove(temporary)
		return nil, err
	}
	if err := os.Rename(temporary, path); err != nil {
		ln.Close()
		os.Remove(temporary)
		return nil, err
	}
	return ln, nil
}

// stop ends the socket before the ledger closes: no new connection, the
// commands in flight get until ctx ends, then their context is canceled
// and they are waited for, and the socket file is removed.
func (s *operatorServer) stop(ctx context.Context) {
	if s == nil {
		return
	}
	s.once.Do(func() {
		if err := s.hs.Shutdown(ctx); err != nil {
			s.cancel()
			s.hs.Close()
		}
		s.cancel()
		s.wg.Wait()
		if err := os.Remove(s.path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			s.log.Warn("operator socket not removed", "socket", s.path, "error", err)
		}
	})
}

// readRequest decodes a request's body, bounded.
func (s *operatorServer) readRequest(w http.ResponseWriter, r *http.Request) (operatorRequest, bool) {
	var req operatorRequest
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, operatorRequestBytesMax))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		http.Error(w, "operator socket: malformed request: "+err.Error(), http.StatusBadRequest)
		return req, false
	}
	if len(req.Args) > operatorArgsMax {
		http.Error(w, fmt.Sprintf("operator socket: %d arguments, at most %d", len(req.Args), operatorArgsMax), http.StatusBadRequest)
		return req, false
	}
	return req, true
}

// frames starts a framed answer.
func frames(w http.ResponseWriter) *frameWriter {
	w.Header().Set("Content-Type", operatorContentType)
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	return &frameWriter{w: w, flush: func() { _ = rc.Flush() }}
}

// app returns the app a command of the request runs with, or the error
// that refuses the request.
func (s *operatorServer) app(req operatorRequest) (*app, error) {
	name := s.host.path
	if req.DB != "" {
		if !sameFileAs(req.DB, s.host.path) {
			return nil, invalidInputf("the operator socket %s serves the ledger %s, not %s", s.path, s.host.path, req.DB)
		}
		name = req.DB
	}
	return &app{database: name, host: s.host, environment: func(string) string { return "" }}, nil
}

// sameFileAs reports whether two paths name one existing file.
func sameFileAs(a, b string) bool {
	x, err := os.Stat(a)
	if err != nil {
		return false
	}
	y, err := os.Stat(b)
	return err == nil && os.SameFile(x, y)
}

// run executes one command line inside the server and streams what it
// prints, then its exit code.
func (s *operatorServer) run(w http.ResponseWriter, r *http.Request) {
	s.wg.Add(1)
	defer s.wg.Done()
	req, ok := s.readRequest(w, r)
	if !ok {
		return
	}
	fw := frames(w)
	sub, err := s.app(req)
	if err != nil {
		_ = fw.exit(reportError(fw.kind(frameStderr), wantsJSON(req.Args), err))
		return
	}
	code := execute(r.Context(), sub, req.Args, strings.NewReader(""), fw.kind(frameStdout), fw.kind(frameStderr))
	_ = fw.exit(code)
}

// backup streams a backup of the server's ledger: its bytes, then its
// summary, then the exit code.
func (s *operatorServer) backup(w http.ResponseWriter, r *http.Request) {
	s.wg.Add(1)
	defer s.wg.Done()
	req, ok := s.readRequest(w, r)
	if !ok {
		return
	}
	fw := frames(w)
	fail := func(err error) { _ = fw.exit(reportError(fw.kind(frameStderr), req.JSON, err)) }
	if _, err := s.app(req); err != nil {
		fail(err)
		return
	}
	backend, ok := s.host.db.Backend().(*bolt.Backend)
	if !ok {
		fail(fmt.Errorf("backup: %w: the ledger %s is not a file", errors.ErrUnsupported, s.host.path))
		return
	}
	info, err := backend.Backup(r.Context(), fw.kind(frameData))
	if err != nil {
		fail(err)
		return
	}
	summary, err := json.Marshal(newBackupSummary(info))
	if err != nil {
		fail(err)
		return
	}
	if err := fw.write(frameInfo, summary); err != nil {
		return // the client went away
	}
	_ = fw.exit(exitSuccess)
}
