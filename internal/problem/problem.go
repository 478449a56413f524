// Package problem writes RFC 9457 problem details (application/problem+json)
// with the stable machine-readable code every refusal of the project carries.
// The replay guard, the API key check, the rate limiter and the server's
// handlers all write their refusals through Write, so a client reads one
// shape whichever layer refused it.
package problem

import (
	"encoding/json"
	"net/http"
	"strconv"
	"time"
)

// ContentType is the media type of a problem body.
const ContentType = "application/problem+json"

// TypePrefix begins every problem's type URI; the code follows it.
const TypePrefix = "urn:ledgerworks:problem:"

// Problem is one refusal. Code is required; Status defaults to 500 and Title
// to the status text.
type Problem struct {
	Status int
	Code   string
	Title  string
	Detail string
	// RetryAfter, when positive, is sent as Retry-After in whole seconds
	// (rounded up, at least 1).
	RetryAfter time.Duration
	// Extra holds members beside the standard ones (for example the seq of
	// the entry that holds a conflicting key); its names must not be one of
	// type, title, status, code or detail.
	Extra map[string]any
}

// Body is the JSON object Write sends, for clients and tests that decode it.
type Body struct {
	Type   string `json:"type"`
	Title  string `json:"title"`
	Status int    `json:"status"`
	Code   string `json:"code"`
	Detail string `json:"detail,omitempty"`
}

// Write sends p as the whole response: status, Content-Type, Cache-Control
// no-store and Retry-After, then the body and a newline.
func Write(w http.ResponseWriter, p Problem) {
	if p.Code == "" {
		panic("problem: a problem without a code")
	}
	status := p.Status
	if status == 0 {
		status = http.StatusInternalServerError
	}
	title := p.Title
	if title == "" {
		title = http.StatusText(status)
	}
	h := w.Header()
	h.Set("Content-Type", ContentType)
	h.Set("Cache-Control", "no-store")
	if p.RetryAfter > 0 {
		h.Set("Retry-After", strconv.FormatInt(RetryAfterSeconds(p.RetryAfter), 10))
	}
	w.WriteHeader(status)
	_, _ = w.Write(Marshal(Body{Type: TypePrefix + p.Code, Title: title, Status: status, Code: p.Code, Detail: p.Detail}, p.Extra))
}

// RetryAfterSeconds rounds d up to whole seconds, at least 1.
func RetryAfterSeconds(d time.Duration) int64 {
	s := int64((d + time.Second - 1) / time.Second)
	return max(s, 1)
}

// Marshal encodes b and the extra members as one JSON object ending in a
// newline.
func Marshal(b Body, extra map[string]any) []byte {
	out, err := json.Marshal(b)
	if err != nil {
		panic(err) // a Body of strings and an int always encodes
	}
	if len(extra) > 0 {
		more, err := json.Marshal(extra)
		if err != nil {
			panic("problem: extra members do not encode: " + err.Error())
		}
		if len(more) > 2 {
			out = append(out[:len(out)-1], ',')
			out = append(out, more[1:]...)
		}
	}
	return append(out, '\n')
}
