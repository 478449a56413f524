package server

import (
	"bytes"
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
// errors are 400 INVALID_INPUT naming the member by its JSON path.
func checkMembers(data []byte, t reflect.Type) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	w := memberWalker{dec: dec}
	if err := w.value(t, "", 0); err != nil {
		return err
	}
	if _, err := dec.Token(); err != io.EOF {
		return invalidf("the body holds more than one JSON value")
	}
	return nil
}

type memberWalker struct {
	dec *json.Decoder
}

var (
	unmarshalerType     = reflect.TypeFor[json.Unmarshaler]()
	textUnmarshalerType = reflect.TypeFor[encoding.TextUnmarshaler]()
)

// value reads one value; t is the Go type it decodes into, nil when the
// value is not decoded into a struct (any, or a type that decodes itself):
// its objects are then only checked for duplicate names.
func (w *memberWalker) value(t reflect.Type, path string, depth int) error {
	if depth > membersDepthMax {
		return invalidf("the body nests deeper than %d", membersDepthMax)
	}
	tok, err := w.dec.Token()
	if err != nil {
		return syntaxError(err)
	}
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t != nil && (reflect.PointerTo(t).Implements(unmarshalerType) || reflect.PointerTo(t).Implements(textUnmarshalerType)) {
		t = nil
	}
	d, ok := tok.(json.Delim)
	if !ok {
		return nil // a scalar; its type is the decoder's to check
	}
	switch d {
	case '{':
		return w.object(t, path, depth)
	case '[':
		var elem reflect.Type
		if t != nil && (t.Kind() == reflect.Slice || t.Kind() == reflect.Array) {
			elem = t.Elem()
		}
		for i := 0; w.dec.More(); i++ {
			if err := w.value(elem, path+"["+strconv.Itoa(i)+"]", depth+1); err != nil {
				return err
			}
		}
		_, err := w.dec.Token() // ']'
		return syntaxError(err)
	}
	return invalidf("the body is not valid JSON")
}

// object reads an object's members after its '{'.
func (w *memberWalker) object(t reflect.Type, path string, depth int) error {
	var fields map[string]reflect.Type
	var elem reflect.Type
	switch {
	case t == nil:
	case t.Kind() == reflect.Struct:
		fields = fieldsOf(t)
	case t.Kind() == reflect.Map:
		elem = t.Elem()
	}
	seen := map[string]bool{}
	for w.dec.More() {
		tok, err := w.dec.Token()
		if err != nil {
			return syntaxError(err)
		}
		name, _ := tok.(string)
		at := memberPath(path, name)
		vt := elem
		seenAs := name
		if fields != nil {
			ft, ok := fields[name]
			if !ok {
				for known := range fields {
					if strings.EqualFold(known, name) {
						return invalidf("member %q: member names are case-sensitive; did you mean %q?", at, memberPath(path, known))
					}
				}
				return invalidf("member %q: no such member", at)
			}
			vt, seenAs = ft, string(foldName(name))
		}
		if seen[seenAs] {
			return invalidf("member %q: given more than once", at)
		}
		seen[seenAs] = true
		if err := w.value(vt, at, depth+1); err != nil {
			return err
		}
	}
	_, err := w.dec.Token() // '}'
	return syntaxError(err)
}

// memberPath names a member as the decoder's errors do: its path from the
// body, dot-separated.
func memberPath(path, name string) string {
	if path == "" {
		return name
	}
	return path + "." + name
}

// syntaxError turns a token error into a 400 INVALID_INPUT.
func syntaxError(err error) error {
	if err == nil {
		return nil
	}
	var se *json.SyntaxError
	if errors.As(err, &se) {
		return invalidf("the body is not valid JSON at byte %d: %s", se.Offset, se.Error())
	}
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return invalidf("the body ends inside a JSON value")
	}
	return invalidf("the body is not valid JSON: %v", err)
}

// fieldCache maps a struct type to its JSON member names and their types.
var fieldCache sync.Map // reflect.Type → map[string]reflect.Type

// fieldsOf returns the JSON member names of the struct type t as
// encoding/json names them (the json tag's name, else the field's name;
// "-" and unexported fields omitted; embedded structs' fields promoted).
func fieldsOf(t reflect.Type) map[string]reflect.Type {
	if m, ok := fieldCache.Load(t); ok {
		return m.(map[string]reflect.Type)
	}
	m := map[string]reflect.Type{}
	addFields(m, t, 0)
	fieldCache.Store(t, m)
	return m
}

func addFields(m map[string]reflect.Type, t reflect.Type, depth int) {
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
			m[name] = ft
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
