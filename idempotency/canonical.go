package idempotency

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"slices"
	"strings"
	"unicode/utf8"
)

// canonicalDepthMax bounds the nesting CanonicalJSON follows.
const canonicalDepthMax = 64

var errNotCanonicalizable = errors.New("idempotency: not canonicalizable JSON")

// CanonicalJSON returns a canonical form of the JSON document in data:
// object members sorted by key (byte order), insignificant whitespace
// removed, strings re-escaped uniformly. Numbers are kept as written (1.0
// and 1 stay different: the guard does not guess at a service's number
// semantics). It returns an error for anything that is not exactly one JSON
// value, for objects with a duplicate key (whose meaning differs between
// parsers) and for nesting deeper than 64; callers then hash the bytes as
// they are.
func CanonicalJSON(data []byte) ([]byte, error) {
	if !utf8.Valid(data) {
		return nil, errNotCanonicalizable // the decoder would replace the bad bytes
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var out bytes.Buffer
	out.Grow(len(data))
	if err := canonicalValue(dec, &out, 0); err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errNotCanonicalizable
	}
	return out.Bytes(), nil
}

func canonicalValue(dec *json.Decoder, out *bytes.Buffer, depth int) error {
	if depth > canonicalDepthMax {
		return errNotCanonicalizable
	}
	tok, err := dec.Token()
	if err != nil {
		return errNotCanonicalizable
	}
	switch t := tok.(type) {
	case json.Delim:
		switch t {
		case '{':
			return canonicalObject(dec, out, depth)
		case '[':
			out.WriteByte('[')
			for i := 0; dec.More(); i++ {
				if i > 0 {
					out.WriteByte(',')
				}
				if err := canonicalValue(dec, out, depth+1); err != nil {
					return err
				}
			}
			if end, err := dec.Token(); err != nil || end != json.Delim(']') {
				return errNotCanonicalizable
			}
			out.WriteByte(']')
			return nil
		}
		return errNotCanonicalizable
	case string:
		writeString(out, t)
	case json.Number:
		out.WriteString(string(t))
	case bool:
		if t {
			out.WriteString("true")
		} else {
			out.WriteString("false")
		}
	case nil:
		out.WriteString("null")
	default:
		return errNotCanonicalizable
	}
	return nil
}

func canonicalObject(dec *json.Decoder, out *bytes.Buffer, depth int) error {
	type member struct {
		key   string
		value []byte
	}
	var members []member
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return errNotCanonicalizable
		}
		key, ok := tok.(string)
		if !ok {
			return errNotCanonicalizable
		}
		var v bytes.Buffer
		if err := canonicalValue(dec, &v, depth+1); err != nil {
			return err
		}
		members = append(members, member{key, v.Bytes()})
	}
	if end, err := dec.Token(); err != nil || end != json.Delim('}') {
		return errNotCanonicalizable
	}
	slices.SortFunc(members, func(a, b member) int { return strings.Compare(a.key, b.key) })
	out.WriteByte('{')
	for i, m := range members {
		if i > 0 {
			if members[i-1].key == m.key {
				return errNotCanonicalizable
			}
			out.WriteByte(',')
		}
		writeString(out, m.key)
		out.WriteByte(':')
		out.Write(m.value)
	}
	out.WriteByte('}')
	return nil
}

func writeString(out *bytes.Buffer, s string) {
	enc := json.NewEncoder(out)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s)           // a string always encodes
	out.Truncate(out.Len() - 1) // Encode's newline
}
