package server

import (
	"net/http"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/ledgerworks/ledger/api"
)

// OpenAPIVersion is the version of the OpenAPI document.
const OpenAPIVersion = "3.1.0"

// OpenAPI returns the OpenAPI 3.1 document of the route table: one
// operation per route, its schemas generated from the api types.
func (s *Server) OpenAPI() map[string]any {
	g := &schemaGen{schemas: map[string]any{}}
	problemRef := g.ref(reflect.TypeOf(api.Problem{}))
	paths := map[string]any{}
	for _, rt := range s.routes {
		item, _ := paths[rt.Path].(map[string]any)
		if item == nil {
			item = map[string]any{}
			paths[rt.Path] = item
		}
		item[strings.ToLower(rt.Method)] = g.operation(rt, problemRef)
	}
	return map[string]any{
		"openapi": OpenAPIVersion,
		"info": map[string]any{"title": "ledgerworks ledger", "version": "1",
			"description": "A hash-chained, append-only ledger with stock, financial and valuation domains, " +
				"an outbox and an inbox. Chain names are relative to the API key's tenant. Decimal amounts are strings. " +
				"64-bit integers (seqs, *_unix_nano, counts) are strings of decimal digits (format int64), as in proto3's JSON mapping. " +
				"Every state-changing route requires Idempotency-Key; a replay carries Idempotent-Replayed: true."},
		"paths": paths,
		"components": map[string]any{
			"schemas": g.schemas,
			"securitySchemes": map[string]any{"bearer": map[string]any{"type": "http", "scheme": "bearer",
				"description": "Authorization: Bearer <API key token>"}},
		},
	}
}

func (g *schemaGen) operation(rt *Route, problemRef map[string]any) map[string]any {
	op := map[string]any{"operationId": rt.ID, "summary": rt.Summary, "tags": []string{rt.Tag}}
	var params []any
	for _, p := range rt.PathParams() {
		desc := ""
		if p == "name" {
			desc = "chain name relative to the tenant; may contain /"
		}
		params = append(params, map[string]any{"name": p, "in": "path", "required": true, "description": desc,
			"schema": paramSchema(paramType(p))})
	}
	for _, q := range rt.Query {
		params = append(params, map[string]any{"name": q.Name, "in": "query", "description": q.Description,
			"schema": paramSchema(q.Type)})
	}
	if rt.Guarded {
		params = append(params, map[string]any{"name": api.HeaderIdempotencyKey, "in": "header", "required": true,
			"description": "one key per intent, reused with the same body on every retry",
			"schema":      map[string]any{"type": "string", "maxLength": 255}})
	}
	if params != nil {
		op["parameters"] = params
	}
	if rt.Scope != "" {
		op["security"] = []any{map[string]any{"bearer": []string{}}}
		op["x-scope"] = string(rt.Scope)
	}
	if rt.Request != nil {
		op["requestBody"] = map[string]any{"required": rt.Method != http.MethodDelete,
			"content": map[string]any{api.MediaJSON: map[string]any{"schema": g.schema(reflect.TypeOf(rt.Request))}}}
	}
	ok := map[string]any{"description": http.StatusText(rt.Status)}
	switch {
	case rt.Response != nil:
		ok["content"] = map[string]any{api.MediaJSON: map[string]any{"schema": g.schema(reflect.TypeOf(rt.Response))}}
	default:
		ok["content"] = map[string]any{"text/plain": map[string]any{"schema": map[string]any{"type": "string"}}}
	}
	if rt.Guarded {
		ok["headers"] = map[string]any{api.HeaderReplayed: map[string]any{"description": "true on a replayed response",
			"schema": map[string]any{"type": "string"}}}
	}
	op["responses"] = map[string]any{
		strconv.Itoa(rt.Status): ok,
		"default": map[string]any{"description": "a refusal (RFC 9457)",
			"content": map[string]any{api.MediaProblem: map[string]any{"schema": problemRef}}},
	}
	return op
}

func paramType(name string) string {
	if name == "seq" {
		return "int64"
	}
	return "string"
}

// paramSchema is the schema of a parameter of type typ (Param.Type): an
// int64 is decimal digits, described as the bodies' 64-bit integers are,
// so that a generated client takes a string and never rounds a seq.
func paramSchema(typ string) map[string]any {
	if typ == "int64" {
		return map[string]any{"type": "string", "format": "int64", "pattern": "^[0-9]{1,20}$"}
	}
	return map[string]any{"type": typ}
}

// schemaGen builds JSON Schemas of the api types, each struct once under
// components/schemas.
type schemaGen struct{ schemas map[string]any }

func (g *schemaGen) ref(t reflect.Type) map[string]any {
	name := t.Name()
	if _, done := g.schemas[name]; !done {
		g.schemas[name] = nil // mark, for recursive types
		g.schemas[name] = g.object(t)
	}
	return map[string]any{"$ref": "#/components/schemas/" + name}
}

func (g *schemaGen) schema(t reflect.Type) map[string]any {
	switch t.Kind() {
	case reflect.Pointer:
		return g.schema(t.Elem())
	case reflect.Struct:
		return g.ref(t)
	case reflect.String:
		return map[string]any{"type": "string"}
	case reflect.Bool:
		return map[string]any{"type": "boolean"}
	case reflect.Int64:
		return map[string]any{"type": "integer", "format": "int64"}
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32:
		// The API's ints are bounded (a status, attempts): numbers.
		return map[string]any{"type": "integer"}
	case reflect.Uint8, reflect.Uint16, reflect.Uint32:
		return map[string]any{"type": "integer", "minimum": 0}
	case reflect.Uint, reflect.Uint64:
		return map[string]any{"type": "integer", "minimum": 0, "format": "uint64"}
	case reflect.Slice:
		if t.Elem().Kind() == reflect.Uint8 {
			return map[string]any{"type": "string", "contentEncoding": "base64"}
		}
		return map[string]any{"type": "array", "items": g.schema(t.Elem())}
	case reflect.Map:
		if t.Elem().Kind() == reflect.Interface {
			return map[string]any{"type": "object"}
		}
		return map[string]any{"type": "object", "additionalProperties": g.schema(t.Elem())}
	case reflect.Interface:
		return map[string]any{}
	}
	panic("server: no schema for " + t.String())
}

func (g *schemaGen) object(t reflect.Type) map[string]any {
	props := map[string]any{}
	var required []string
	for i := range t.NumField() {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		if !f.IsExported() || tag == "-" {
			continue
		}
		name, opts, _ := strings.Cut(tag, ",")
		if name == "" {
			name = f.Name
		}
		props[name] = g.schema(f.Type)
		if quoted64(f.Type, opts) {
			props[name] = int64String(f.Type)
		}
		if !strings.Contains(opts, "omitempty") {
			required = append(required, name)
		}
	}
	sort.Strings(required)
	out := map[string]any{"type": "object", "properties": props, "additionalProperties": false}
	if len(required) > 0 {
		out["required"] = required
	}
	return out
}

// quoted64 says whether a field is a 64-bit integer encoded as a JSON
// string (its tag's ,string option), as proto3's JSON mapping encodes
// them: a JavaScript number is exact only up to 2^53.
func quoted64(t reflect.Type, opts string) bool {
	k := t.Kind()
	return (k == reflect.Int64 || k == reflect.Uint64) && slices.Contains(strings.Split(opts, ","), "string")
}

// int64String is the schema of a 64-bit integer in a JSON string: format
// int64, as every generator maps to its 64-bit integer or big-integer
// type, and a pattern of decimal digits (no sign for an unsigned one).
func int64String(t reflect.Type) map[string]any {
	if t.Kind() == reflect.Uint64 {
		return map[string]any{"type": "string", "format": "int64", "pattern": "^[0-9]{1,20}$",
			"description": "an unsigned 64-bit integer, in decimal, as a JSON string"}
	}
	return map[string]any{"type": "string", "format": "int64", "pattern": "^-?[0-9]{1,19}$",
		"description": "a signed 64-bit integer, in decimal, as a JSON string"}
}

func (s *Server) serveOpenAPI(c *call) {
	c.w.Header().Set("Cache-Control", "no-cache")
	writeJSON(c.w, http.StatusOK, s.openapi)
}
