package chain_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strings"
	"testing"

	"github.com/ledgerworks/ledger/chain"
)

// awkwardRequests exercise every corner of the export encoding: quotes,
// backslashes, HTML characters, multi-byte runes, empty and binary payloads.
func awkwardRequests() []chain.Request {
	return []chain.Request{
		{Chain: "acme/stock/SKU-1", IdempotencyKey: "receipt-42", Type: "stock.movement/v1", Payload: []byte(`{"qty":"10"}`)},
		{Chain: "acme/stock/SKU-1", Type: "stock.movement/v1"},
		{Chain: `quote"back\slash`, IdempotencyKey: `k"\`, Type: `t<&>/v1`, Payload: []byte{0, 1, 2, 0xff, 0xfe}},
		{Chain: "ünïcødé/日本/😀", IdempotencyKey: "ключ\u2028sep", Type: "類型/v1", Payload: []byte("ü")},
		{Chain: "ünïcødé/日本/😀", Type: "t", Payload: bytes.Repeat([]byte("long payload "), 300)},
	}
}

func exportAll(t *testing.T, db *chain.DB, chains ...string) []byte {
	t.Helper()
	var buf bytes.Buffer
	if _, err := db.Export(context.Background(), &buf, chains, nil); err != nil {
		t.Fatalf("export: %v", err)
	}
	return buf.Bytes()
}

func TestExportRoundTrip(t *testing.T) {
	forEachBackend(t, chain.Options{}, func(t *testing.T, db *chain.DB) {
		ctx := context.Background()
		for _, req := range awkwardRequests() {
			mustAppend(t, db, req)
		}
		chains := []string{"acme/stock/SKU-1", `quote"back\slash`, "ünïcødé/日本/😀"}
		export := exportAll(t, db, chains...)
		lines := strings.SplitAfter(string(export), "\n")
		if lines[len(lines)-1] != "" {
			t.Fatal("export does not end with a newline")
		}
		lines = lines[:len(lines)-1]
		if len(lines) != 5 {
			t.Fatalf("%d lines", len(lines))
		}
		i := 0
		for _, ch := range chains {
			for stored, err := range db.Entries(ctx, ch, 1) {
				if err != nil {
					t.Fatal(err)
				}
				line := []byte(strings.TrimSuffix(lines[i], "\n"))
				e, err := chain.DecodeExportLine(line)
				if err != nil {
					t.Fatalf("line %d: %v\n%s", i+1, err, line)
				}
				if !equalEntries(e, stored) {
					t.Fatalf("line %d decodes to %+v, stored %+v", i+1, e, stored)
				}
				if again := chain.AppendExportLine(nil, &e); string(again) != lines[i] {
					t.Fatalf("line %d re-encodes differently:\n%s%s", i+1, lines[i], again)
				}
				checkExportLineIsPlainJSON(t, line, stored)
				i++
			}
		}
		report, err := chain.VerifyExport(ctx, bytes.NewReader(export), chain.VerifyOptions{})
		if err != nil || !report.OK() || report.Chains != 3 || report.Entries != 5 {
			t.Fatalf("verify export: %+v %v", report, err)
		}
	})
}

// checkExportLineIsPlainJSON reads a line with a general JSON decoder, as an
// auditor's tool would, and checks the fields of Format v1.
func checkExportLineIsPlainJSON(t *testing.T, line []byte, e chain.Entry) {
	t.Helper()
	var fields map[string]any
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.UseNumber()
	if err := dec.Decode(&fields); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, line)
	}
	want := map[string]any{
		"chain": e.Chain, "seq": json.Number(fmt.Sprint(e.Seq)), "time_unix_nano": json.Number(fmt.Sprint(e.TimeUnixNano)),
		"idempotency_key": e.IdempotencyKey, "type": e.Type, "payload": base64.StdEncoding.EncodeToString(e.Payload),
		"prev_hash": e.PrevHash.String(), "hash": e.Hash.String(),
	}
	if !reflect.DeepEqual(fields, want) {
		t.Fatalf("fields %v\nwant   %v", fields, want)
	}
	order := []string{"chain", "seq", "time_unix_nano", "idempotency_key", "type", "payload", "prev_hash", "hash"}
	last := -1
	for _, name := range order {
		at := bytes.Index(line, []byte(`"`+name+`":`))
		if at <= last {
			t.Fatalf("field %q out of order in %s", name, line)
		}
		last = at
	}
}

func TestExportOfAnUnknownChain(t *testing.T) {
	db, _ := openFile(t, chain.Options{})
	mustAppend(t, db, chain.Request{Chain: "c", Type: "t"})
	var buf bytes.Buffer
	if _, err := db.Export(context.Background(), &buf, []string{"nope"}, nil); !errors.Is(err, chain.ErrNotFound) {
		t.Fatalf("export of an unknown chain: %v", err)
	}
}

func TestExportAndVerifyReportProgress(t *testing.T) {
	db, _ := openFile(t, chain.Options{})
	ctx := context.Background()
	const entries = 16384 + 100
	appendBigAndSmall(t, db, entries, 100)
	var exportProgress []int64
	var buf bytes.Buffer
	n, err := db.Export(ctx, &buf, []string{"big", "small"}, func(n int64) { exportProgress = append(exportProgress, n) })
	if err != nil || n != entries {
		t.Fatalf("export: %d %v", n, err)
	}
	if !reflect.DeepEqual(exportProgress, []int64{16384, entries}) {
		t.Fatalf("export progress %v", exportProgress)
	}
	check := func(name string, progress []chain.Progress) {
		t.Helper()
		if len(progress) != 2 || progress[0].Entries != 16384 || progress[1] != (chain.Progress{Chains: 2, Entries: entries}) {
			t.Fatalf("%s progress %+v", name, progress)
		}
	}
	var verifyProgress []chain.Progress
	report, err := db.Verify(ctx, chain.VerifyOptions{Progress: func(p chain.Progress) { verifyProgress = append(verifyProgress, p) }})
	if err != nil || !report.OK() {
		t.Fatalf("verify %+v %v", report, err)
	}
	check("verify", verifyProgress)
	var exportVerifyProgress []chain.Progress
	report, err = chain.VerifyExport(ctx, &buf, chain.VerifyOptions{Progress: func(p chain.Progress) { exportVerifyProgress = append(exportVerifyProgress, p) }})
	if err != nil || !report.OK() {
		t.Fatalf("verify export %+v %v", report, err)
	}
	check("verify export", exportVerifyProgress)

	canceled, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := db.Verify(canceled, chain.VerifyOptions{}); !errors.Is(err, context.Canceled) {
		t.Fatalf("verify with a canceled context: %v", err)
	}
	if _, err := chain.VerifyExport(canceled, strings.NewReader(""), chain.VerifyOptions{}); !errors.Is(err, context.Canceled) {
		t.Fatalf("verify export with a canceled context: %v", err)
	}
}

func TestVerifyExportExpectHeads(t *testing.T) {
	db, _ := openFile(t, chain.Options{})
	var entries []chain.Entry
	for i := range 4 {
		entries = append(entries, mustAppend(t, db, chain.Request{Chain: "c", Type: "t", Payload: []byte{byte(i)}}).Entry)
	}
	mustAppend(t, db, chain.Request{Chain: "d", Type: "t"})
	export := exportAll(t, db, "c", "d")
	verify := func(heads ...chain.Head) []chain.Failure {
		t.Helper()
		report, err := chain.VerifyExport(context.Background(), bytes.NewReader(export), chain.VerifyOptions{ExpectHeads: heads})
		if err != nil {
			t.Fatal(err)
		}
		return report.Failures
	}
	assertFailures(t, verify(entries[3].Head(), entries[1].Head()))
	wrong := entries[2].Head()
	wrong.Hash[0] ^= 1
	assertFailures(t, verify(wrong), failureKey{"c", 3, chain.ReasonHeadMismatch})
	beyond := chain.Head{Chain: "c", Seq: 9, Hash: entries[3].Hash}
	assertFailures(t, verify(beyond), failureKey{"c", 9, chain.ReasonHeadMismatch})
	missing := chain.Head{Chain: "gone", Seq: 1}
	assertFailures(t, verify(missing, beyond), failureKey{"c", 9, chain.ReasonHeadMismatch}, failureKey{"gone", 1, chain.ReasonHeadMismatch})

	// A saved head at seq 0 is the head of an empty chain: it holds when it
	// is the genesis, for a chain with entries or without.
	assertFailures(t, verify(chain.Head{Chain: "c", Hash: chain.Genesis("c")}, chain.Head{Chain: "gone", Hash: chain.Genesis("gone")}))
	assertFailures(t, verify(chain.Head{Chain: "c", Hash: entries[0].Hash}), failureKey{"c", 0, chain.ReasonHeadMismatch})
	for _, heads := range [][]chain.Head{
		{{Chain: "c", Hash: chain.Genesis("c")}, {Chain: "gone", Hash: chain.Genesis("gone")}},
		{{Chain: "c", Hash: chain.Genesis("d")}},
	} {
		report, err := verifyEachWay(t, db, context.Background(), chain.VerifyOptions{ExpectHeads: heads})
		if err != nil || report.OK() != (heads[0].Hash == chain.Genesis("c")) {
			t.Fatalf("saved heads at seq 0 %v: %+v %v", heads, report, err)
		}
	}

	// The same saved heads against the database.
	report, err := verifyEachWay(t, db, context.Background(), chain.VerifyOptions{ExpectHeads: []chain.Head{wrong, beyond, missing}})
	if err != nil {
		t.Fatal(err)
	}
	assertFailures(t, report.Failures, failureKey{"c", 3, chain.ReasonHeadMismatch},
		failureKey{"c", 9, chain.ReasonHeadMismatch}, failureKey{"gone", 1, chain.ReasonHeadMismatch})
}

func TestDecodeExportLineIsStrict(t *testing.T) {
	e := sampleEntry()
	good := strings.TrimSuffix(string(chain.AppendExportLine(nil, &e)), "\n")
	if _, err := chain.DecodeExportLine([]byte(good)); err != nil {
		t.Fatalf("good line: %v", err)
	}
	replace := func(old, new string) string {
		if !strings.Contains(good, old) {
			t.Fatalf("%q not in %s", old, good)
		}
		return strings.Replace(good, old, new, 1)
	}
	prev, hash := e.PrevHash.String(), e.Hash.String()
	bad := map[string]string{
		"empty":                  "",
		"not an object":          `[]`,
		"trailing data":          good + `{}`,
		"trailing space":         good + " ",
		"leading space":          " " + good,
		"space after colon":      replace(`"seq":`, `"seq": `),
		"field missing":          replace(`"type":"stock.movement/v1",`, ""),
		"unknown field":          replace(`{"chain"`, `{"extra":1,"chain"`),
		"field twice":            replace(`"seq":3,`, `"seq":3,"seq":3,`),
		"field in upper case":    replace(`"seq":`, `"SEQ":`),
		"fields reordered":       replace(`"chain":"acme/stock/SKU-1","seq":3`, `"seq":3,"chain":"acme/stock/SKU-1"`),
		"seq 0":                  replace(`"seq":3`, `"seq":0`),
		"seq negative":           replace(`"seq":3`, `"seq":-3`),
		"seq as string":          replace(`"seq":3`, `"seq":"3"`),
		"seq with exponent":      replace(`"seq":3`, `"seq":3e0`),
		"seq with fraction":      replace(`"seq":3`, `"seq":3.0`),
		"seq with leading zero":  replace(`"seq":3`, `"seq":03`),
		"seq too large":          replace(`"seq":3`, `"seq":18446744073709551616`),
		"time as minus zero":     replace(`"time_unix_nano":1764000000123456789`, `"time_unix_nano":-0`),
		"time too large":         replace(`"time_unix_nano":1764000000123456789`, `"time_unix_nano":9223372036854775808`),
		"escaped letter":         replace(`"receipt-42"`, `"\u0072eceipt-42"`),
		"escaped slash":          replace(`"acme/stock`, `"acme\/stock`),
		"escaped control":        replace(`"receipt-42"`, `"receipt\n42"`),
		"invalid UTF-8":          replace(`"receipt-42"`, "\"receipt\xff42\""),
		"empty type":             replace(`"stock.movement/v1"`, `""`),
		"empty chain":            replace(`"acme/stock/SKU-1"`, `""`),
		"payload not base64":     replace(`"payload":"`, `"payload":"!`),
		"payload unpadded":       strings.Replace(good, `"payload":"eyJxdHkiOiIxMCJ9"`, `"payload":"eyJxdHkiOiIxMCJ"`, 1),
		"payload URL alphabet":   replace(`"payload":"`, `"payload":"-_-_`),
		"payload with newline":   replace(`"payload":"eyJx`, `"payload":"eyJx\n`),
		"hash upper case":        replace(hash, strings.ToUpper(hash)),
		"hash short":             replace(hash, hash[:62]),
		"hash long":              replace(hash, hash+"00"),
		"prev_hash not hex":      replace(prev, "g"+prev[1:]),
		"prev_hash null":         replace(`"`+prev+`"`, `null`),
		"key null":               replace(`"receipt-42"`, `null`),
		"line with CR":           good + "\r",
		"line with newline":      good + "\n",
		"key too long":           replace(`"receipt-42"`, `"`+strings.Repeat("k", 257)+`"`),
		"nested object in field": replace(`"receipt-42"`, `{"a":1}`),
	}
	if bad["payload unpadded"] == good {
		t.Fatal("payload unpadded case did not change the line")
	}
	for name, line := range bad {
		_, err := chain.DecodeExportLine([]byte(line))
		if !errors.Is(err, chain.ErrCorrupt) {
			t.Errorf("%s: %v, want ErrCorrupt\n%s", name, err, line)
		}
	}
	long := make([]byte, chain.ExportLineLengthMax+1)
	if _, err := chain.DecodeExportLine(long); !errors.Is(err, chain.ErrCorrupt) {
		t.Errorf("overlong line: %v", err)
	}
}

func TestExportReaderNamesTheLine(t *testing.T) {
	e := sampleEntry()
	line := chain.AppendExportLine(nil, &e)
	input := string(line) + string(line) + "garbage\n"
	r := chain.NewExportReader(strings.NewReader(input))
	for i := 1; i <= 2; i++ {
		if _, err := r.Next(); err != nil || r.Line() != int64(i) {
			t.Fatalf("line %d: %v (Line %d)", i, err, r.Line())
		}
	}
	_, err := r.Next()
	if !errors.Is(err, chain.ErrCorrupt) || !strings.HasPrefix(err.Error(), "line 3:") {
		t.Fatalf("garbage line: %v", err)
	}
	if _, err := r.Next(); err != io.EOF {
		t.Fatalf("after the last line: %v", err)
	}
	// A line longer than ExportLineLengthMax is refused; reading 90 MB is
	// left to the runs without the race detector.
	if raceEnabled {
		return
	}
	huge := io.MultiReader(strings.NewReader(`{"chain":"`), neverEnding('a'))
	if _, err := chain.NewExportReader(bufio.NewReader(huge)).Next(); !errors.Is(err, chain.ErrCorrupt) {
		t.Fatalf("endless line: %v", err)
	}
}

// neverEnding is an endless stream of one byte.
type neverEnding byte

func (b neverEnding) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = byte(b)
	}
	return len(p), nil
}

func TestVerifyExportFindsBrokenLines(t *testing.T) {
	db, _ := openFile(t, chain.Options{})
	for i := range 3 {
		for _, ch := range []string{"a", "b"} {
			mustAppend(t, db, chain.Request{Chain: ch, Type: "t", Payload: []byte{byte(i)}})
		}
	}
	lines := strings.SplitAfter(string(exportAll(t, db, "a", "b")), "\n")[:6]
	verify := func(lines ...string) []chain.Failure {
		t.Helper()
		report, err := chain.VerifyExport(context.Background(), strings.NewReader(strings.Join(lines, "")), chain.VerifyOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return report.Failures
	}
	assertFailures(t, verify(lines...))
	assertFailures(t, verify(), []failureKey{}...)
	// b's lines split by a's: b's second run is not contiguous.
	assertFailures(t, verify(lines[3], lines[0], lines[1], lines[2], lines[4], lines[5]),
		failureKey{"b", 2, chain.ReasonSeqGap})
	// A line that does not decode ends the check, reported at the seq it
	// most likely held.
	assertFailures(t, verify(lines[0], lines[1], "{\n", lines[2]), failureKey{"a", 3, chain.ReasonUndecodable})
	assertFailures(t, verify("not json\n"), failureKey{"", 0, chain.ReasonUndecodable})
}
