package main

import (
	"encoding/base64"
	"encoding/json"
	"strings"
	"testing"
)

func TestGetPrintsTheEntryWithItsPayload(t *testing.T) {
	t.Parallel()
	for _, l := range testLedgers(t) {
		t.Run(l.backend, func(t *testing.T) {
			l.t = t
			l.seed()
			var out strings.Builder
			out.WriteString(l.must("get", "acme/audit/events", "3"))
			out.WriteString(l.must("get", "acme/scanner/WH-1/dock-2", "2"))
			out.WriteString(l.must("-o", "json", "get", "acme/scanner/WH-1/dock-2", "2"))
			golden(t, "get", out.String())
		})
	}
}

func TestGetJSONPayloadIsTheStoredBytes(t *testing.T) {
	t.Parallel()
	l := newFileLedger(t)
	l.seed()
	var e entryJSON
	if err := json.Unmarshal([]byte(l.must("-o", "json", "get", "acme/scanner/WH-1/dock-2", "2")), &e); err != nil {
		t.Fatal(err)
	}
	payload, err := base64.StdEncoding.DecodeString(e.Payload)
	if err != nil || string(payload) != "\x00\x01binary\n" {
		t.Fatalf("payload %q %v", payload, err)
	}
}

func TestGetErrors(t *testing.T) {
	t.Parallel()
	l := newFileLedger(t)
	l.seed()
	l.run("-o", "json", "get", "acme/audit/events", "6").expect(t, exitNotFound, `"code":"NOT_FOUND"`)
	l.run("get", "acme/nothing", "1").expect(t, exitNotFound, "not found")
	l.run("get", "acme/audit/events", "0").expect(t, exitUsage, "want a number from 1")
	l.run("get", "acme/audit/events", "three").expect(t, exitUsage, "want a number from 1")
	l.run("get", "acme/audit/events").expect(t, exitUsage, "takes 2 argument(s)")
}
