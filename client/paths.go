package client

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
)

// route builds an escaped path from the base: literal parts are written as
// they are, parts given as seg(…) are escaped as one path segment, and
// chainPath(…) as a chain name whose "/" separate segments.
type route struct {
	b   strings.Builder
	err error
}

func newRoute(literal string) *route {
	r := &route{}
	r.b.WriteString(literal)
	return r
}

// seg appends one escaped segment ("/" inside it is escaped too).
func (r *route) seg(name, value string) *route {
	if value == "" {
		r.fail(name)
	}
	r.b.WriteByte('/')
	r.b.WriteString(url.PathEscape(value))
	return r
}

// chain appends a chain name relative to the tenant, one segment a part.
func (r *route) chain(name string) *route {
	if name == "" || strings.HasPrefix(name, "/") || strings.HasSuffix(name, "/") || strings.Contains(name, "//") {
		r.fail("chain name " + strconv.Quote(name))
	}
	for part := range strings.SplitSeq(name, "/") {
		r.b.WriteByte('/')
		r.b.WriteString(url.PathEscape(part))
	}
	return r
}

func (r *route) lit(s string) *route {
	r.b.WriteString(s)
	return r
}

func (r *route) fail(what string) {
	if r.err == nil {
		r.err = fmt.Errorf("%w: %s is empty or malformed", ErrInvalidArgument, what)
	}
}

func (r *route) path() (string, error) { return r.b.String(), r.err }

// post sends a state-changing request with its Idempotency-Key.
func (c *Client) post(ctx context.Context, r *route, in, out any, opts []CallOption) error {
	p, err := r.path()
	if err != nil {
		return err
	}
	return c.do(ctx, call{method: http.MethodPost, path: p, in: in, out: out, keyed: true}, opts)
}

// del sends a DELETE with its Idempotency-Key.
func (c *Client) del(ctx context.Context, r *route, out any, opts []CallOption) error {
	p, err := r.path()
	if err != nil {
		return err
	}
	return c.do(ctx, call{method: http.MethodDelete, path: p, out: out, keyed: true}, opts)
}

// get sends a read.
func (c *Client) get(ctx context.Context, r *route, q url.Values, out any, opts []CallOption) error {
	p, err := r.path()
	if err != nil {
		return err
	}
	return c.do(ctx, call{method: http.MethodGet, path: p, query: q, out: out}, opts)
}

// query collects the parameters that are set.
type query url.Values

func (q query) uint(name string, v uint64) query {
	if v != 0 {
		q[name] = []string{strconv.FormatUint(v, 10)}
	}
	return q
}

func (q query) int(name string, v int64) query {
	if v != 0 {
		q[name] = []string{strconv.FormatInt(v, 10)}
	}
	return q
}

func (q query) str(name, v string) query {
	if v != "" {
		q[name] = []string{v}
	}
	return q
}

func (q query) values() url.Values { return url.Values(q) }

func uintString(v uint64) string { return strconv.FormatUint(v, 10) }
