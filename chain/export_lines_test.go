package chain_test

import (
	"context"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/ledgerworks/ledger/chain"
)

// exportOfTwo returns the lines of a valid export of one chain with two
// entries, LF included.
func exportOfTwo() (first, second string) {
	e1 := chain.Entry{Chain: "acme/audit", Seq: 1, PrevHash: chain.Genesis("acme/audit"), TimeUnixNano: 1, Type: "t/v1", Payload: []byte("a")}
	e1.Hash = e1.ComputeHash()
	e2 := chain.Entry{Chain: "acme/audit", Seq: 2, PrevHash: e1.Hash, TimeUnixNano: 2, Type: "t/v1", Payload: []byte("b")}
	e2.Hash = e2.ComputeHash()
	return string(chain.AppendExportLine(nil, &e1)), string(chain.AppendExportLine(nil, &e2))
}

// TestExportLineEnds: one rule per case. Lines end with LF alone (CR LF is
// refused, saying so); empty lines after the last entry are ignored; an
// empty line before an entry is refused; a missing final LF is accepted.
func TestExportLineEnds(t *testing.T) {
	first, second := exportOfTwo()
	for _, c := range []struct {
		name, input string
		entries     int64
		failure     string // "" when the export verifies
	}{
		{"canonical", first + second, 2, ""},
		{"no final LF", first + strings.TrimSuffix(second, "\n"), 2, ""},
		{"one trailing empty line", first + second + "\n", 2, ""},
		{"three trailing empty lines", first + second + "\n\n\n", 2, ""},
		{"only empty lines", "\n\n", 0, ""},
		{"empty line between entries", first + "\n" + second, 1, "line 2: corrupt ledger: export line: empty; empty lines may only follow the last entry"},
		{"leading empty line", "\n" + first + second, 0, "line 1: corrupt ledger: export line: empty"},
		{"CR LF", strings.ReplaceAll(first+second, "\n", "\r\n"), 0, "line 1: corrupt ledger: export line: ends with CR LF"},
		{"CR LF on the last line", first + strings.ReplaceAll(second, "\n", "\r\n"), 1, "line 2: corrupt ledger: export line: ends with CR LF"},
		{"trailing CR LF empty line", first + second + "\r\n", 2, "line 3: corrupt ledger: export line: ends with CR LF"},
	} {
		t.Run(c.name, func(t *testing.T) {
			report, err := chain.VerifyExport(context.Background(), strings.NewReader(c.input), chain.VerifyOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if report.Entries != c.entries {
				t.Errorf("%d entries, want %d", report.Entries, c.entries)
			}
			switch {
			case c.failure == "" && !report.OK():
				t.Fatalf("failures %v", report.Failures)
			case c.failure != "" && (len(report.Failures) != 1 || report.Failures[0].Reason != chain.ReasonUndecodable ||
				!strings.HasPrefix(report.Failures[0].Detail, c.failure)):
				t.Fatalf("failures %v, want one undecodable %q", report.Failures, c.failure)
			}
			// ExportReader, which import reads with, agrees.
			r := chain.NewExportReader(strings.NewReader(c.input))
			var n int64
			for {
				_, err := r.Next()
				if err == io.EOF {
					break
				}
				if err != nil {
					if c.failure == "" || !strings.HasPrefix(err.Error(), c.failure) || !errors.Is(err, chain.ErrCorrupt) {
						t.Fatalf("ExportReader: %v", err)
					}
					break
				}
				n++
			}
			if n != c.entries {
				t.Fatalf("ExportReader read %d entries, want %d", n, c.entries)
			}
		})
	}
}

// TestNonCanonicalLineIsNamed: a line a JSON tool re-serialised is refused
// with ErrNonCanonicalLine beside ErrCorrupt, and a message that says it is
// valid JSON and how to get the canonical form; a damaged line is not.
func TestNonCanonicalLineIsNamed(t *testing.T) {
	e := sampleEntry()
	good := strings.TrimSuffix(string(chain.AppendExportLine(nil, &e)), "\n")
	spaced := strings.NewReplacer(`":`, `": `, `,"`, `, "`).Replace(good)
	for name, line := range map[string]string{
		"spaces":           spaced,
		"fields reordered": strings.Replace(good, `"chain":"acme/stock/SKU-1","seq":3`, `"seq":3,"chain":"acme/stock/SKU-1"`, 1),
		"escaped letter":   strings.Replace(good, `"receipt-42"`, `"\u0072eceipt-42"`, 1),
		"escaped slash":    strings.Replace(good, `"acme/stock`, `"acme\/stock`, 1),
		"indented":         "{\n  " + strings.TrimPrefix(spaced, "{"),
	} {
		_, err := chain.DecodeExportLine([]byte(line))
		if !errors.Is(err, chain.ErrNonCanonicalLine) || !errors.Is(err, chain.ErrCorrupt) {
			t.Errorf("%s: %v, want ErrNonCanonicalLine and ErrCorrupt", name, err)
			continue
		}
		for _, says := range []string{"valid JSON", "non-canonical form", "ledgerctl export", "Canonical lines"} {
			if !strings.Contains(err.Error(), says) {
				t.Errorf("%s: %q does not say %q", name, err, says)
			}
		}
	}
	for name, line := range map[string]string{
		"truncated":     good[:len(good)-10],
		"field missing": strings.Replace(good, `"type":"stock.movement/v1",`, "", 1),
		"unknown field": strings.Replace(good, `{"chain"`, `{"extra":1,"chain"`, 1),
		"seq as string": strings.Replace(good, `"seq":3`, `"seq":"3"`, 1),
		"not JSON":      "garbage",
	} {
		_, err := chain.DecodeExportLine([]byte(line))
		if !errors.Is(err, chain.ErrCorrupt) || errors.Is(err, chain.ErrNonCanonicalLine) {
			t.Errorf("%s: %v, want ErrCorrupt alone", name, err)
		}
	}
}
