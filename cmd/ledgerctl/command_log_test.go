package main

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestLogPagesThroughAChain(t *testing.T) {
	t.Parallel()
	for _, l := range testLedgers(t) {
		t.Run(l.backend, func(t *testing.T) {
			l.t = t
			l.seed()
			var out strings.Builder
			out.WriteString(l.must("log", "acme/audit/events", "--limit", "2"))
			out.WriteString(l.must("log", "acme/audit/events", "--from", "3", "--limit", "2"))
			out.WriteString(l.must("log", "acme/audit/events", "--from", "5"))
			out.WriteString(l.must("-o", "json", "log", "acme/scanner/WH-1/dock-2"))
			golden(t, "log", out.String())

			var seqs []uint64
			from := "1"
			for pages := 0; from != "0"; pages++ {
				if pages > 5 {
					t.Fatal("paging does not end")
				}
				var page logJSON
				if err := json.Unmarshal([]byte(l.must("-o", "json", "log", "acme/audit/events", "--from", from, "--limit", "2")), &page); err != nil {
					t.Fatal(err)
				}
				for _, e := range page.Entries {
					seqs = append(seqs, e.Seq)
				}
				from = jsonNumber(page.NextSeq)
			}
			if got := jsonNumber(seqs...); got != "1 2 3 4 5" {
				t.Fatalf("paged seqs %s", got)
			}
		})
	}
}

func TestLogErrors(t *testing.T) {
	t.Parallel()
	l := newFileLedger(t)
	l.seed()
	l.run("log", "acme/nothing").expect(t, exitNotFound, "not found")
	l.run("log", "acme/audit/events", "--limit", "0").expect(t, exitUsage, "--limit 0")
	l.run("log", "acme/audit/events", "--limit", "100001").expect(t, exitUsage, "--limit 100001")
	l.run("log", "acme/audit/events", "--from", "0").expect(t, exitUsage, "--from 0")
	l.run("log", "acme/audit/events", "--from", "x").expect(t, exitUsage, "")
	// Past the end: an empty page, not an error.
	var page logJSON
	if err := json.Unmarshal([]byte(l.must("-o", "json", "log", "acme/audit/events", "--from", "9")), &page); err != nil {
		t.Fatal(err)
	}
	if len(page.Entries) != 0 || page.NextSeq != 0 {
		t.Fatalf("page past the end: %+v", page)
	}
}

// jsonNumber joins numbers with spaces.
func jsonNumber(n ...uint64) string {
	b, _ := json.Marshal(n)
	return strings.Trim(strings.ReplaceAll(string(b), ",", " "), "[]")
}
