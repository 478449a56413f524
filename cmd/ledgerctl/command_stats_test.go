package main

import (
	"encoding/json"
	"os"
	"regexp"
	"testing"
)

func TestStatsCountsChainsEntriesAndBytes(t *testing.T) {
	t.Parallel()
	for _, l := range testLedgers(t) {
		t.Run(l.backend, func(t *testing.T) {
			l.t = t
			l.seed()
			var s statsJSON
			if err := json.Unmarshal([]byte(l.must("-o", "json", "stats")), &s); err != nil {
				t.Fatal(err)
			}
			// The payloads seed writes: five {"event":"eN"}, "+10", the binary one and the posting.
			payloadBytes := int64(5*len(`{"event":"e1"}`) + len("+10") + len("\x00\x01binary\n") + len("user mrossi signed in at HQ"))
			if s.Chains != 3 || s.Entries != 8 || s.PayloadBytes != payloadBytes {
				t.Fatalf("stats %+v, want 3 chains, 8 entries, %d payload bytes", s, payloadBytes)
			}
			if s.FileSizeBytes <= 0 {
				t.Fatalf("size %d", s.FileSizeBytes)
			}
			if l.backend == "bolt" {
				info, err := os.Stat(l.name)
				if err != nil {
					t.Fatal(err)
				}
				if info.Size() != s.FileSizeBytes {
					t.Fatalf("file_size_bytes %d, file is %d bytes", s.FileSizeBytes, info.Size())
				}
			}
		})
	}
}

func TestStatsText(t *testing.T) {
	t.Parallel()
	l := newFileLedger(t)
	l.seed()
	// The file's size depends on the system's page size: left out.
	out := regexp.MustCompile(`(?m)^(file_size_bytes +)\d+$`).ReplaceAllString(l.must("stats"), "${1}$$SIZE")
	golden(t, "stats", out)
}
