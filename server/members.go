package server

import (
	"encoding"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"unicode"
	"unicode/utf8"
)

// membersDepthMax bounds the nesting checkMembers follows, as the replay
// guard's canonical form does.
const membersDepthMax = 64

// checkMembers reads the JSON document data against the type t a handler
// decodes it into, and refuses what encoding/json would act on differently
// from the canonical form the replay guard hashes: a member name that is
// not exactly the name of a field (the decoder matches names regardless of
// case, so "Quantity" would set quantity), and a member given twice
// (compared as the decoder compares them; it keeps the last). With both
// refused, two bodies of one canonical form decode to one request. Its
// errors are 400 INVALID_INPUT naming the member by its JSON path, or
// errNotJSON for a body that is not valid JSON, which the decoder then
// refuses with the position of the fault.
func checkMembers(data []byte, t reflect.Type) error {
	w := memberWalker{in: data}
	w.ws()
	err := w.value(t, 0)
	if err == nil {
		return nil
	}
	var me *memberError
	if !errors.As(err, &me) {
		return errNotJSON
	}
	path := ""
	for i := len(me.path) - 1; i >= 0; i-- {
		seg := me.path[i]
		if path != "" && !strings.HasPrefix(seg, "[") { // a name may be empty
			path += "."
		}
		path += seg
	}
	return invalidf("member %q: %s", path, me.reason)
}

// memberError is a refused member; path holds its path's segments from the
// member up (names, and [i] for array elements).
type memberError struct {
	reason string
	path   []string
}

func (e *memberError) Error() string { return e.reason }

// errNotJSON ends the walk of a body that is not valid JSON.
var errNotJSON = errors.New("not valid JSON")

// memberWalker reads a JSON document for checkMembers: it finds the
// members' names and skips every other value, and allocates nothing while
// the body is as the handlers want it.
type memberWalker struct {
	in  []byte
	pos int
}

var (
	unmarshalerType     = reflect.TypeFor[json.Unmarshaler]()
	textUnmarshalerType = reflect.TypeFor[encoding.TextUnmarshaler]()
)

func (w *memberWalker) ws() {
	for w.pos < len(w.in) {
		switch w.in[w.pos] {
		case ' ', '\t', '\n', '\r':
			w.pos++
		default:
			return
		}
	}
}

// value reads one value; t is the Go type it decodes into, nil when the
// value is not decoded into a struct (any, or a type that decodes itself):
// its objects are then only checked for names given twice.
func (w *memberWalker) value(t reflect.Type, depth int) error {
	if depth > membersDepthMax {
		return &memberError{reason: fmt.Sprintf("the body nests deeper than %d", membersDepthMax)}
	}
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t != nil && (reflect.PointerTo(t).Implements(unmarshalerType) || reflect.PointerTo(t).Implements(textUnmarshalerType)) {
		t = nil
	}
	if w.pos >= len(w.in) {
		return errNotJSON
	}
	switch w.in[w.pos] {
	case '{':
		return w.object(t, depth)
	case '[':
		var elem reflect.Type
		if t != nil && (t.Kind() == reflect.Slice || t.Kind() == reflect.Array) {
			elem = t.Elem()
		}
		return w.array(elem, depth)
	case '"':
		_, _, err := w.str()
		return err
	}
	// A number or a literal: the decoder checks it.
	for w.pos < len(w.in) {
		switch w.in[w.pos] {
		case ',', ']', '}', ' ', '\t', '\n', '\r':
			return nil
		}
		w.pos++
	}
	return nil
}

func (w *memberWalker) array(elem reflect.Type, depth int) error {
	w.pos++ // [
	w.ws()
	if w.pos < len(w.in) && w.in[w.pos] == ']' {
		w.pos++
		return nil
	}
	for i := 0; ; i++ {
		w.ws()
		if err := w.value(elem, depth+1); err != nil {
			var me *memberError
			if errors.As(err, &me) {
				me.path = append(me.path, "["+strconv.Itoa(i)+"]")
			}
			return err
		}
		if end, err := w.next(']'); end || err != nil {
			return err
		}
	}
}

// next reads what follows an element or a member: a comma (more follow)
// or closer, which ends the array or object (end).
func (w *memberWalker) next(closer byte) (end bool, err error) {
	w.ws()
	if w.pos >= len(w.in) {
		return false, errNotJSON
	}
	switch w.in[w.pos] {
	case ',':
		w.pos++
		return false, nil
	case closer:
		w.pos++
		return true, nil
	}
	return false, errNotJSON
}

// object reads an object's members.
func (w *memberWalker) object(t reflect.Type, depth int) error {
	var fields map[string]field
	var elem reflect.Type
	switch {
	case t == nil:
	case t.Kind() == reflect.Struct:
		fields = fieldsOf(t)
	case t.Kind() == reflect.Map:
		elem = t.Elem()
	}
	var seenFields uint64    // a struct's fields by index, up to 64
	var seen map[string]bool // other names (a map's keys), made on the second
	var first []byte
	w.pos++ // {
	w.ws()
	if w.pos < len(w.in) && w.in[w.pos] == '}' {
		w.pos++
		return nil
	}
	for n := 0; ; n++ {
		w.ws()
		if w.pos >= len(w.in) || w.in[w.pos] != '"' {
			return errNotJSON
		}
		name, escaped, err := w.str()
		if err != nil {
			return err
		}
		if escaped {
			var s string
			if json.Unmarshal(name, &s) != nil {
				return errNotJSON
			}
			name = []byte(s)
		} else {
			name = name[1 : len(name)-1]
		}
		vt := elem
		twice := false
		if fields != nil {
			f, ok := fields[string(name)]
			if !ok {
				return unknownMember(fields, string(name))
			}
			vt = f.typ
			if f.index < 64 {
				twice = seenFields&(1<<f.index) != 0
				seenFields |= 1 << f.index
			} else {
				twice = seen[string(foldName(string(name)))]
				if seen == nil {
					seen = map[string]bool{}
				}
				seen[string(foldName(string(name)))] = true
			}
		} else {
			// A map keeps the last of two equal keys; so does the
			// decoder's any.
			switch {
			case n == 0:
				first = name
			case seen == nil:
				seen = map[string]bool{string(first): true}
				fallthrough
			default:
				twice = seen[string(name)]
				seen[string(name)] = true
			}
		}
		if twice {
			return &memberError{reason: "given more than once", path: []string{string(name)}}
		}
		w.ws()
		if w.pos >= len(w.in) || w.in[w.pos] != ':' {
			return errNotJSON
		}
		w.pos++
		w.ws()
		if err := w.value(vt, depth+1); err != nil {
			var me *memberError
			if errors.As(err, &me) {
				me.path = append(me.path, string(name))
			}
			return err
		}
		if end, err := w.next('}'); end || err != nil {
			return err
		}
	}
}

// unknownMember refuses a name that is no field's.
func unknownMember(fields map[string]field, name string) error {
	for known := range fields {
		if strings.EqualFold(known, name) {
			return &memberError{reason: fmt.Sprintf("member names are case-sensitive: the member is %q", known),
				path: []string{name}}
		}
	}
	return &memberError{reason: "no such member", path: []string{name}}
}

// str reads a string token, quotes included, and whether it holds an
// escape.
func (w *memberWalker) str() ([]byte, bool, error) {
	start := w.pos
	escaped := false
	for w.pos++; w.pos < len(w.in); w.pos++ {
		switch w.in[w.pos] {
		case '\\':
			escaped = true
			w.pos++
		case '"':
			w.pos++
			return w.in[start:w.pos], escaped, nil
		}
	}
	return nil, false, errNotJSON
}

// syntaxError turns a decoder's syntax error into a 400 INVALID_INPUT.
func syntaxError(err error) error {
	var se *json.SyntaxError
	if errors.As(err, &se) {
		return invalidf("the body is not valid JSON at byte %d: %s", se.Offset, se.Error())
	}
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return invalidf("the body ends inside a JSON value")
	}
	return invalidf("the body is not valid JSON: %v", err)
}

// field is a struct field as encoding/json sees it.
type field struct {
	index int
	typ   reflect.Type
}

// fieldCache maps a struct type to its JSON member names.
var fieldCache sync.Map // reflect.Type → map[string]field

// fieldsOf returns the JSON member names of the struct type t as
// encoding/json names them (the json tag's name, else the field's name;
// "-" and unexported fields omitted; embedded structs' fields promoted).
func fieldsOf(t reflect.Type) map[string]field {
	if m, ok := fieldCache.Load(t); ok {
		return m.(map[string]field)
	}
	m := map[string]field{}
	addFields(m, t, 0)
	fieldCache.Store(t, m)
	return m
}

func addFields(m map[string]field, t reflect.Type, depth int) {
	if depth > 8 {
		panic("server: a request type embeds structs deeper than 8") // the api types embed none
	}
	for i := range t.NumField() {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, _, _ := strings.Cut(tag, ",")
		ft := f.Type
		if f.Anonymous && name == "" {
			if ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if ft.Kind() == reflect.Struct {
				addFields(m, ft, depth+1)
				continue
			}
		}
		if !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		if _, dup := m[name]; !dup {
			m[name] = field{index: len(m), typ: ft}
		}
	}
}

// foldName folds a member name as encoding/json does to match it to a
// field: ASCII letters upper-cased, other runes mapped through
// unicode.ToUpper(unicode.ToLower(r)).
func foldName(in string) []byte {
	out := make([]byte, 0, len(in))
	for i := 0; i < len(in); {
		if c := in[i]; c < utf8.RuneSelf {
			if 'a' <= c && c <= 'z' {
				c -= 'a' - 'A'
			}
			out = append(out, c)
			i++
			continue
		}
		r, n := utf8.DecodeRuneInString(in[i:])
		out = utf8.AppendRune(out, unicode.ToUpper(unicode.ToLower(r)))
		i += n
	}
	return out
}

// decodeError turns an error of encoding/json into a 400 INVALID_INPUT
// that names the member by its JSON path and its JSON type, never a Go
// type or field.
func decodeError(err error) error {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		at := te.Field
		if at == "" {
			at = "the body"
		} else {
			at = fmt.Sprintf("member %q", at)
		}
		return invalidf("%s: a JSON %s where %s is wanted", at, te.Value, jsonKind(te.Type))
	}
	var se *json.SyntaxError
	if errors.As(err, &se) || errors.Is(err, io.ErrUnexpectedEOF) {
		return syntaxError(err)
	}
	if strings.Contains(err.Error(), "invalid use of ,string struct tag") {
		// encoding/json's words for a number where a ,string field wants a
		// string name no member: say what the API wants.
		return invalidf("a 64-bit integer (seq, *_unix_nano, counts) is a JSON string of decimal digits such as \"12\"")
	}
	var ce base64.CorruptInputError
	if errors.As(err, &ce) {
		return invalidf("a bytes member is not standard padded base64: %v", err)
	}
	return invalidf("the body does not decode: %s", strings.TrimPrefix(err.Error(), "json: "))
}

// jsonKind names the JSON type a Go type is decoded from.
func jsonKind(t reflect.Type) string {
	if t == nil {
		return "a value"
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "a boolean"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return "an integer"
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "an unsigned integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Slice:
		if t.Elem().Kind() == reflect.Uint8 {
			return "a base64 string"
		}
		return "an array"
	case reflect.Array:
		return "an array"
	case reflect.Struct, reflect.Map:
		return "an object"
	}
	return "another type"
}
