package server

import (
	"encoding/base64"

	"github.com/ledgerworks/ledger/api"
)

// decodeAppend decodes a raw append's body into req. The form every
// client sends, {"type":"…","payload":"…"} (each member at most once, in
// either order, the type printable ASCII without escapes, the payload
// standard base64, whitespace between the tokens), is read without
// reflection and without a decoder; any other body goes through decode,
// which answers it as it answers every route's. Both read the same
// request from the same bytes (FuzzAppendBody).
func (c *call) decodeAppend(req *api.AppendRequest) error {
	if ct := c.r.Header.Get("Content-Type"); ct != "" {
		if err := checkMediaType(ct); err != nil {
			return err
		}
	}
	if err := c.readBody(); err != nil {
		return err
	}
	if parseAppendBody(c.body, req) {
		return nil
	}
	// decode keeps what it is given (an interface value): its own
	// variable, so that the caller's stays on the stack.
	var v api.AppendRequest
	err := c.decode(&v)
	*req = v
	return err
}

// parseAppendBody reads b into req when b has the form decodeAppend
// reads without a decoder, and reports whether it had.
func parseAppendBody(b []byte, req *api.AppendRequest) bool {
	p := appendBodyParser{memberWalker{in: b}}
	p.ws()
	if !p.next('{') {
		return false
	}
	var seenType, seenPayload bool
	for {
		p.ws()
		name, ok := p.plainString()
		if !ok {
			return false
		}
		p.ws()
		if !p.next(':') {
			return false
		}
		p.ws()
		value, ok := p.plainString()
		if !ok {
			return false
		}
		switch {
		case string(name) == "type" && !seenType:
			seenType = true
			req.Type = string(value)
		case string(name) == "payload" && !seenPayload:
			seenPayload = true
			// As encoding/json decodes a []byte.
			payload := make([]byte, base64.StdEncoding.DecodedLen(len(value)))
			n, err := base64.StdEncoding.Decode(payload, value)
			if err != nil {
				return false
			}
			req.Payload = payload[:n]
		default: // another member, or one given twice: decode's to answer
			return false
		}
		p.ws()
		if p.next(',') {
			continue
		}
		if !p.next('}') {
			return false
		}
		p.ws()
		return p.pos == len(p.in)
	}
}

// appendBodyParser is parseAppendBody's position in its input; it skips
// whitespace as checkMembers' walker does.
type appendBodyParser struct{ memberWalker }

// next consumes the byte c when it comes next.
func (p *appendBodyParser) next(c byte) bool {
	if p.pos < len(p.in) && p.in[p.pos] == c {
		p.pos++
		return true
	}
	return false
}

// plainString consumes a string of printable ASCII without escapes, and
// returns what is between its quotes: the string itself, as encoding/json
// would decode it. Any other string, or another value, is not consumed.
func (p *appendBodyParser) plainString() ([]byte, bool) {
	if !p.next('"') {
		return nil, false
	}
	start := p.pos
	for i := start; i < len(p.in); i++ {
		switch c := p.in[i]; {
		case c == '"':
			p.pos = i + 1
			return p.in[start:i], true
		case c < 0x20 || c > 0x7e || c == '\\':
			return nil, false
		}
	}
	return nil, false
}
