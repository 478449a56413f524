package server

import (
	"bytes"
	"net"
	"net/http"
	"strconv"

	"github.com/ledgerworks/ledger/api"
	"github.com/ledgerworks/ledger/internal/problem"
)

// Listener returns ln with the refusals net/http writes itself made
// application/problem+json. net/http answers a request it cannot parse on
// the connection, in text/plain, before any handler runs: a malformed
// request line, target or header (400), headers over MaxHeaderBytes (431),
// an unknown transfer coding (501), an HTTP version it does not speak
// (505), an Expect other than 100-continue (417), plain HTTP on a TLS port
// (400). Each has a fixed form; the connections rewrite it into a problem
// with a code as it is written. Server.Serve serves on it. Under TLS only
// the last can be rewritten: the others are written encrypted (see
// docs/SERVER.md).
func Listener(ln net.Listener) net.Listener { return problemListener{ln} }

type problemListener struct{ net.Listener }

func (l problemListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &problemConn{Conn: c}, nil
}

// problemConn rewrites net/http's own refusals as they are written.
type problemConn struct{ net.Conn }

func (c *problemConn) Write(b []byte) (int, error) {
	out, ok := rewriteRefusal(b)
	if !ok {
		return c.Conn.Write(b)
	}
	if _, err := c.Conn.Write(out); err != nil {
		return 0, err
	}
	return len(b), nil
}

// CloseWrite half-closes the connection when it can: net/http does so
// before it closes a connection whose request it did not read whole.
func (c *problemConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}

// The forms of net/http's own refusals.
const (
	// plainHeaders ends the status line of a refusal written before a
	// request exists: "HTTP/1.1 <status>" plainHeaders <text>.
	plainHeaders = "\r\nContent-Type: text/plain; charset=utf-8\r\nConnection: close\r\n\r\n"
	// expectationFailed begins the answer to an unknown Expect (headers
	// only, no body): no handler of the server answers 417.
	expectationFailed = "HTTP/1.1 417 "
	// tlsPlainHTTP is the answer to plain HTTP on a TLS port.
	tlsPlainHTTP = "HTTP/1.0 400 Bad Request\r\n\r\nClient sent an HTTP request to an HTTPS server.\n"
)

// rewriteRefusal returns the problem+json answer of b when b is one of
// net/http's own refusals, whole.
func rewriteRefusal(b []byte) ([]byte, bool) {
	if len(b) < 13 || b[0] != 'H' || !bytes.HasPrefix(b, []byte("HTTP/1.")) {
		return nil, false
	}
	switch {
	case bytes.Equal(b, []byte(tlsPlainHTTP)):
		return refusal(http.StatusBadRequest, api.CodeInvalidInput, "plain HTTP sent to a TLS port"), true
	case bytes.HasPrefix(b, []byte(expectationFailed)):
		return refusal(http.StatusExpectationFailed, api.CodeUnsupportedProtocol, "Expect: only 100-continue is supported"), true
	}
	i := bytes.Index(b, []byte(plainHeaders))
	if i < 12 || !bytes.HasPrefix(b, []byte("HTTP/1.1 ")) || bytes.IndexByte(b[:i], '\n') >= 0 {
		return nil, false
	}
	status, err := strconv.Atoi(string(b[9:12]))
	if err != nil || status < 400 || status > 599 {
		return nil, false
	}
	// The text repeats the status line: "400 Bad Request: missing
	// required Host header".
	detail := string(b[i+len(plainHeaders):])
	if _, after, found := bytes.Cut(b[9:i], []byte(": ")); found {
		detail = string(after)
	}
	switch status {
	case http.StatusRequestHeaderFieldsTooLarge:
		return refusal(status, api.CodeHeadersTooLarge, "the request's headers exceed the server's limit"), true
	case http.StatusNotImplemented:
		return refusal(status, api.CodeUnsupportedProtocol, "the transfer coding is not supported"), true
	case http.StatusHTTPVersionNotSupported:
		return refusal(status, api.CodeUnsupportedProtocol, "the HTTP version is not supported"), true
	case http.StatusBadRequest:
		if detail == "400 Bad Request" {
			return refusal(status, api.CodeInvalidInput, "the request line or a header is malformed"), true
		}
		return refusal(status, api.CodeInvalidInput, "the request line or a header is malformed: "+detail), true
	}
	return refusal(status, api.CodeInvalidInput, detail), true
}

// refusal is a whole HTTP/1.1 answer: the problem, then the connection
// closes (as net/http closes it after each of these).
func refusal(status int, code, detail string) []byte {
	body := problem.Marshal(problem.Body{Type: problem.TypePrefix + code, Title: http.StatusText(status), Status: status,
		Code: code, Detail: detail}, nil)
	out := make([]byte, 0, 160+len(body))
	out = append(out, "HTTP/1.1 "...)
	out = strconv.AppendInt(out, int64(status), 10)
	out = append(out, ' ')
	out = append(out, http.StatusText(status)...)
	out = append(out, "\r\nContent-Type: "+problem.ContentType+"\r\nCache-Control: no-store\r\nConnection: close\r\nContent-Length: "...)
	out = strconv.AppendInt(out, int64(len(body)), 10)
	out = append(out, "\r\n\r\n"...)
	return append(out, body...)
}
