package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/ledgerworks/ledger/storage"
)

// socketEnvironment names the variable that gives --socket.
const socketEnvironment = "LEDGER_SOCKET"

// operatorDialTimeout bounds the connection to the operator socket.
const operatorDialTimeout = 2 * time.Second

// operatorCommands are the commands that run through the operator socket
// of a serving process (operator_server.go) when one holds the ledger
// file: every command that only reads, and checkpoint, which records the
// heads it signs (see operatorSharedCommands). backup has its own route.
var operatorCommands = map[string]bool{
	"verify": true, "chains": true, "head": true, "get": true, "log": true, "stats": true, "export": true,
	"checkpoint": true, "prove entry": true, "prove consistency": true,
	"apikey list": true,
	"outbox list": true, "outbox show": true, "outbox dead": true, "outbox stats": true,
	"idempotency list": true, "idempotency show": true,
	"stock item list": true, "stock location list": true, "stock balance": true, "stock history": true,
	"fin account list": true, "fin currency list": true, "fin posting": true, "fin balance": true, "fin trial-balance": true,
	"val item list": true, "val show": true, "val layers": true,
}

// operatorSharedCommands run on the server's own handle rather than a
// read-only one over its storage: checkpoint records the heads it signs,
// and the idempotency commands read the server's replay guard, whose
// leases live in its memory.
var operatorSharedCommands = map[string]bool{"checkpoint": true, "idempotency list": true, "idempotency show": true}

// operatorLocalFlags are the global flags that concern the client only:
// they are not sent.
var operatorLocalFlags = map[string]bool{"db": true, "socket": true, "lock-timeout": true, "log-level": true}

// operatorPathFlags name files: relative paths are made absolute before
// the command line is sent, since the server runs elsewhere.
var operatorPathFlags = map[string]bool{"checkpoint": true, "key": true, "pub": true, "out": true, "file": true}

// errOperatorSocket: the operator socket named with --socket does not
// answer, or answered with something else than frames (exit 5).
var errOperatorSocket = errors.New("operator socket unavailable")

// remoteExit ends a command that ran through the operator socket with the
// exit code the server's run returned; its output has been printed.
type remoteExit struct{ code int }

func (e *remoteExit) Error() string { return fmt.Sprintf("exit %d", e.code) }

// commandName is a command's path without "ledgerctl": "apikey list".
func commandName(cmd *cobra.Command) string {
	_, name, _ := strings.Cut(cmd.CommandPath(), " ")
	return name
}

// routeOperatorCommand runs before every command. Inside the server it
// refuses what the socket does not run; in a client it sends an operator
// command to the server that holds the file, when one answers on its
// socket.
func (a *app) routeOperatorCommand(cmd *cobra.Command) error {
	name := commandName(cmd)
	if a.host != nil {
		if !operatorCommands[name] || !forwardable(cmd, name) {
			return usageErrorf("`ledgerctl %s` does not run through the operator socket: it needs the server stopped", name)
		}
		for flag := range operatorLocalFlags {
			if cmd.Flags().Changed(flag) {
				return usageErrorf("--%s is the client's: the operator socket runs commands on its own ledger", flag)
			}
		}
		a.hostShared = operatorSharedCommands[name]
		return nil
	}
	if !operatorCommands[name] || !forwardable(cmd, name) || isDatabaseURL(a.databaseName()) {
		return nil
	}
	socket, err := a.findServer(cmd.Context())
	if err != nil || socket == "" {
		return err
	}
	cmd.RunE = func(cmd *cobra.Command, args []string) error { return a.runOnServer(cmd, socket, args) }
	return nil
}

// forwardable reports whether a command line reads the ledger: verify
// --file reads an export, checkpoint --every runs until interrupted.
func forwardable(cmd *cobra.Command, name string) bool {
	switch name {
	case "verify":
		return !cmd.Flags().Changed("file")
	case "checkpoint":
		return !cmd.Flags().Changed("every")
	}
	return true
}

// findServer returns the operator socket of the server that holds the
// ledger: --socket (or LEDGER_SOCKET), which must answer, else the
// file's <file>.sock when a server answers there; "" when none does.
func (a *app) findServer(ctx context.Context) (string, error) {
	path, explicit := a.operatorSocketPath()
	if path == "" {
		return "", nil
	}
	var d net.Dialer
	ctx, cancel := context.WithTimeout(ctx, operatorDialTimeout)
	defer cancel()
	conn, err := d.DialContext(ctx, "unix", path)
	if err != nil {
		if explicit {
			return "", fmt.Errorf("operator socket %s: %w: %v", path, errOperatorSocket, err)
		}
		return "", nil
	}
	conn.Close()
	return path, nil
}

// remoteDatabase is the ledger the client names, as an absolute path for
// the server's check; "" when only --socket names it.
func (a *app) remoteDatabase() (string, error) {
	name := a.database
	if name == "" && a.environment != nil {
		name = a.environment(databaseEnvironment)
	}
	if name == "" {
		if _, explicit := a.operatorSocketPath(); explicit {
			return "", nil
		}
		name = databaseDefault
	}
	return filepath.Abs(name)
}

// remoteArgs rebuilds a parsed command line for the server: the command's
// name, every flag set (paths made absolute, the client's own global flags
// left out) and the arguments after "--".
func remoteArgs(cmd *cobra.Command, args []string) ([]string, error) {
	out := strings.Fields(commandName(cmd))
	var err error
	cmd.Flags().Visit(func(f *pflag.Flag) {
		if operatorLocalFlags[f.Name] || err != nil {
			return
		}
		values := []string{f.Value.String()}
		if s, ok := f.Value.(pflag.SliceValue); ok {
			values = s.GetSlice()
		}
		for _, v := range values {
			if operatorPathFlags[f.Name] && v != "" && v != "-" {
				if v, err = filepath.Abs(v); err != nil {
					return
				}
			}
			out = append(out, "--"+f.Name+"="+v)
		}
	})
	if err != nil {
		return nil, err
	}
	return append(append(out, "--"), args...), nil
}

// operatorPost sends a request to the operator socket and returns the
// framed answer.
func operatorPost(ctx context.Context, socket, route string, req operatorRequest) (io.ReadCloser, error) {
	body, err := json.Marshal(req)
	if err != nil {
		return nil, err
	}
	client := &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			d := net.Dialer{Timeout: operatorDialTimeout}
			return d.DialContext(ctx, "unix", socket)
		},
		DisableCompression: true,
	}}
	hreq, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://ledger"+route, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	hreq.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(hreq)
	if err != nil {
		return nil, fmt.Errorf("operator socket %s: %w: %v", socket, errOperatorSocket, err)
	}
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != operatorContentType {
		defer resp.Body.Close()
		text, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return nil, fmt.Errorf("operator socket %s: %w: %s: %s", socket, errOperatorSocket, resp.Status, strings.TrimSpace(string(text)))
	}
	return resp.Body, nil
}

// runOnServer runs the command inside the server that holds the ledger
// and prints what it printed, ending with its exit code.
func (a *app) runOnServer(cmd *cobra.Command, socket string, args []string) error {
	db, err := a.remoteDatabase()
	if err != nil {
		return err
	}
	line, err := remoteArgs(cmd, args)
	if err != nil {
		return err
	}
	body, err := operatorPost(cmd.Context(), socket, "/v1/run", operatorRequest{Args: line, DB: db})
	if err != nil {
		return err
	}
	defer body.Close()
	code, err := relayFrames(body, cmd.OutOrStdout(), cmd.ErrOrStderr(), nil, nil)
	if err != nil {
		return fmt.Errorf("operator socket %s: %w", socket, err)
	}
	if code == exitSuccess {
		return nil
	}
	return &remoteExit{code: code}
}

// relayFrames copies an answer's frames to their writers (data and info
// may be nil when the answer has none) and returns its exit code.
func relayFrames(r io.Reader, stdout, stderr, data io.Writer, info func([]byte) error) (int, error) {
	fr := newFrameReader(r)
	var buf []byte
	for {
		kind, payload, err := fr.next(buf)
		if errors.Is(err, io.EOF) {
			return 0, fmt.Errorf("%w: the answer ended without an exit code", errOperatorStream)
		}
		if err != nil {
			return 0, err
		}
		buf = payload[:0]
		var w io.Writer
		switch kind {
		case frameStdout:
			w = stdout
		case frameStderr:
			w = stderr
		case frameData:
			w = data
		case frameInfo:
			if info == nil {
				return 0, fmt.Errorf("%w: an unexpected summary", errOperatorStream)
			}
			if err := info(payload); err != nil {
				return 0, err
			}
			continue
		case frameExit:
			return exitCodeOf(payload)
		}
		if w == nil {
			return 0, fmt.Errorf("%w: unexpected frame kind %q", errOperatorStream, kind)
		}
		if _, err := w.Write(payload); err != nil {
			return 0, err
		}
	}
}

// lockedHint adds to an error that says the ledger file is locked the
// hint that a server holds it, when one answers on its operator socket.
func (a *app) lockedHint(ctx context.Context, err error) error {
	if !errors.Is(err, storage.ErrLocked) || a.host != nil {
		return err
	}
	socket, findErr := a.findServer(ctx)
	if findErr != nil || socket == "" {
		return err
	}
	return fmt.Errorf("%w; `ledgerctl serve` holds it (operator socket %s): this command needs the server stopped, "+
		"or use the HTTP API (docs/OPERATIONS.md)", err, socket)
}
