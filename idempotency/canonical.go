package idempotency

import (
	"bytes"
	"errors"
	"slices"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
)

// canonicalDepthMax bounds the nesting CanonicalJSON follows.
const canonicalDepthMax = 64

var errNotCanonicalizable = errors.New("idempotency: not canonicalizable JSON")

// CanonicalJSON returns a canonical form of the JSON document in data:
// object members sorted by key (bytewise, on the unescaped keys),
// insignificant whitespace removed, strings escaped one way (only `"`, `\`
// and control characters, the latter as \n, \r, \t, \b, \f or \u00XX).
// Numbers are kept as written (1.0 and 1 stay different: the guard does not
// guess at a service's number semantics). It returns an error for anything
// that is not exactly one JSON value in valid UTF-8, for objects with a
// duplicate key and strings with a lone surrogate (whose meaning differs
// between parsers), and for nesting deeper than 64; callers then hash the
// bytes as they are.
func CanonicalJSON(data []byte) ([]byte, error) {
	out, ok := appendCanonicalJSON(make([]byte, 0, 2*len(data)+16), data, nil)
	if !ok {
		return nil, errNotCanonicalizable
	}
	return out, nil
}

// appendCanonicalJSON appends the canonical form of data to out (see
// CanonicalJSON); members is scratch space for the objects' members. On
// failure out holds garbage after its original length.
func appendCanonicalJSON(out, data []byte, members *[]member) ([]byte, bool) {
	if !utf8.Valid(data) {
		return out, false
	}
	p := canonParser{in: data, out: out}
	if members != nil {
		p.members = (*members)[:0]
	}
	p.ws()
	ok := p.value(0)
	p.ws()
	ok = ok && p.pos == len(p.in)
	if members != nil {
		*members = p.members[:0]
	}
	return p.out, ok
}

type canonParser struct {
	in  []byte
	pos int
	out []byte
	// members is a stack of the members of the objects being read: an
	// object's members follow those of the objects around it.
	members []member
}

// member is an object member read: its unescaped key (in the input, or in
// the escaped keys' buffer) and where its canonical value lies in out.
type member struct {
	key        []byte
	start, end int
}

func (p *canonParser) ws() {
	for p.pos < len(p.in) {
		switch p.in[p.pos] {
		case ' ', '\t', '\n', '\r':
			p.pos++
		default:
			return
		}
	}
}

func (p *canonParser) value(depth int) bool {
	if p.pos >= len(p.in) || depth > canonicalDepthMax {
		return false
	}
	switch c := p.in[p.pos]; {
	case c == '{':
		return p.object(depth)
	case c == '[':
		return p.array(depth)
	case c == '"':
		s, ok := p.str()
		if ok {
			p.out = appendCanonString(p.out, s)
		}
		return ok
	case c == 't':
		return p.literal("true")
	case c == 'f':
		return p.literal("false")
	case c == 'n':
		return p.literal("null")
	case c == '-' || (c >= '0' && c <= '9'):
		return p.number()
	}
	return false
}

func (p *canonParser) literal(lit string) bool {
	if len(p.in)-p.pos < len(lit) || string(p.in[p.pos:p.pos+len(lit)]) != lit {
		return false
	}
	p.pos += len(lit)
	p.out = append(p.out, lit...)
	return true
}

func (p *canonParser) number() bool {
	start := p.pos
	in := p.in
	digits := func() int {
		n := 0
		for p.pos < len(in) && in[p.pos] >= '0' && in[p.pos] <= '9' {
			p.pos++
			n++
		}
		return n
	}
	if in[p.pos] == '-' {
		p.pos++
	}
	if p.pos < len(in) && in[p.pos] == '0' {
		p.pos++
	} else if digits() == 0 {
		return false
	}
	if p.pos < len(in) && in[p.pos] == '.' {
		p.pos++
		if digits() == 0 {
			return false
		}
	}
	if p.pos < len(in) && (in[p.pos] == 'e' || in[p.pos] == 'E') {
		p.pos++
		if p.pos < len(in) && (in[p.pos] == '+' || in[p.pos] == '-') {
			p.pos++
		}
		if digits() == 0 {
			return false
		}
	}
	p.out = append(p.out, in[start:p.pos]...)
	return true
}

// str reads a string token and returns its unescaped value: a slice of the
// input when it has no escapes.
func (p *canonParser) str() ([]byte, bool) {
	p.pos++ // the opening quote
	start := p.pos
	in := p.in
	for p.pos < len(in) {
		c := in[p.pos]
		if c == '"' {
			s := in[start:p.pos:p.pos]
			p.pos++
			return s, true
		}
		if c == '\\' {
			return p.escapedStr(start)
		}
		if c < 0x20 {
			return nil, false
		}
		p.pos++
	}
	return nil, false
}

// escapedStr continues str from the first backslash.
func (p *canonParser) escapedStr(start int) ([]byte, bool) {
	in := p.in
	buf := append([]byte(nil), in[start:p.pos]...)
	for p.pos < len(in) {
		c := in[p.pos]
		switch {
		case c == '"':
			p.pos++
			return buf, true
		case c < 0x20:
			return nil, false
		case c != '\\':
			buf = append(buf, c)
			p.pos++
			continue
		}
		if p.pos+1 >= len(in) {
			return nil, false
		}
		e := in[p.pos+1]
		p.pos += 2
		switch e {
		case '"', '\\', '/':
			buf = append(buf, e)
		case 'b':
			buf = append(buf, '\b')
		case 'f':
			buf = append(buf, '\f')
		case 'n':
			buf = append(buf, '\n')
		case 'r':
			buf = append(buf, '\r')
		case 't':
			buf = append(buf, '\t')
		case 'u':
			r, ok := p.hex4()
			if !ok {
				return nil, false
			}
			if utf16.IsSurrogate(r) {
				if r >= 0xdc00 || p.pos+1 >= len(in) || in[p.pos] != '\\' || in[p.pos+1] != 'u' {
					return nil, false // a lone surrogate
				}
				p.pos += 2
				r2, ok := p.hex4()
				if !ok || r2 < 0xdc00 || r2 > 0xdfff {
					return nil, false
				}
				r = utf16.DecodeRune(r, r2)
			}
			buf = utf8.AppendRune(buf, r)
		default:
			return nil, false
		}
	}
	return nil, false
}

func (p *canonParser) hex4() (rune, bool) {
	if p.pos+4 > len(p.in) {
		return 0, false
	}
	v, err := strconv.ParseUint(string(p.in[p.pos:p.pos+4]), 16, 32)
	if err != nil {
		return 0, false
	}
	p.pos += 4
	return rune(v), true
}

const hexDigits = "0123456789abcdef"

// appendCanonString appends s as a JSON string, escaping only what must be.
func appendCanonString(out []byte, s []byte) []byte {
	out = append(out, '"')
	for {
		// The run of bytes written as they are, appended at once.
		i := 0
		for i < len(s) && s[i] >= 0x20 && s[i] != '"' && s[i] != '\\' {
			i++
		}
		out = append(out, s[:i]...)
		if i == len(s) {
			return append(out, '"')
		}
		c := s[i]
		s = s[i+1:]
		switch c {
		case '"', '\\':
			out = append(out, '\\', c)
		case '\n':
			out = append(out, '\\', 'n')
		case '\r':
			out = append(out, '\\', 'r')
		case '\t':
			out = append(out, '\\', 't')
		case '\b':
			out = append(out, '\\', 'b')
		case '\f':
			out = append(out, '\\', 'f')
		default:
			out = append(out, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
		}
	}
}

func (p *canonParser) array(depth int) bool {
	p.pos++
	p.out = append(p.out, '[')
	p.ws()
	if p.pos < len(p.in) && p.in[p.pos] == ']' {
		p.pos++
		p.out = append(p.out, ']')
		return true
	}
	for {
		p.ws()
		if !p.value(depth + 1) {
			return false
		}
		p.ws()
		if p.pos >= len(p.in) {
			return false
		}
		switch p.in[p.pos] {
		case ',':
			p.pos++
			p.out = append(p.out, ',')
		case ']':
			p.pos++
			p.out = append(p.out, ']')
			return true
		default:
			return false
		}
	}
}

func (p *canonParser) object(depth int) bool {
	p.pos++
	p.ws()
	if p.pos < len(p.in) && p.in[p.pos] == '}' {
		p.pos++
		p.out = append(p.out, '{', '}')
		return true
	}
	mark := len(p.members)
	defer func() { p.members = p.members[:mark] }()
	base := len(p.out)
	for {
		p.ws()
		if p.pos >= len(p.in) || p.in[p.pos] != '"' {
			return false
		}
		key, ok := p.str()
		if !ok {
			return false
		}
		p.ws()
		if p.pos >= len(p.in) || p.in[p.pos] != ':' {
			return false
		}
		p.pos++
		p.ws()
		start := len(p.out)
		if !p.value(depth + 1) {
			return false
		}
		p.members = append(p.members, member{key, start, len(p.out)})
		p.ws()
		if p.pos >= len(p.in) {
			return false
		}
		if p.in[p.pos] == '}' {
			p.pos++
			break
		}
		if p.in[p.pos] != ',' {
			return false
		}
		p.pos++
	}
	members := p.members[mark:]
	// The values were written in input order after base; write the object
	// in key order behind them, then move it down over them.
	slices.SortFunc(members, compareMembers)
	values := len(p.out)
	p.out = append(p.out, '{')
	for i, m := range members {
		if i > 0 {
			if bytes.Equal(members[i-1].key, m.key) {
				return false
			}
			p.out = append(p.out, ',')
		}
		p.out = appendCanonString(p.out, m.key)
		p.out = append(p.out, ':')
		p.out = append(p.out, p.out[m.start:m.end]...)
	}
	p.out = append(p.out, '}')
	n := copy(p.out[base:], p.out[values:])
	p.out = p.out[:base+n]
	return true
}

func compareMembers(a, b member) int { return bytes.Compare(a.key, b.key) }
