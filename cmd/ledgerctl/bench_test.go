package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ledgerworks/ledger/chain"
)

// benchmarkEntries is the size of the export the benchmarks import and verify.
const benchmarkEntries = 20_000

// benchmarkExport writes an export of benchmarkEntries entries over four
// chains, with keys, and returns its path and entries.
func benchmarkExport(b *testing.B) (string, []chain.Entry) {
	b.Helper()
	dir := b.TempDir()
	db, err := chain.Open(filepath.Join(dir, "source.db"), chain.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	ctx := context.Background()
	err = db.Update(ctx, func(tx *chain.Tx) error {
		for i := range benchmarkEntries {
			_, err := tx.Append(chain.Request{Chain: fmt.Sprintf("acme/load/%d", i%4), IdempotencyKey: fmt.Sprintf("op-%d", i),
				Type: "load/v1", Payload: []byte(fmt.Sprintf(`{"line":%d,"amount":"%d.00"}`, i, i%977))})
			if err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
	path := filepath.Join(dir, "export.jsonl")
	f, err := os.Create(path)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	names := []string{"acme/load/0", "acme/load/1", "acme/load/2", "acme/load/3"}
	if _, err := db.Export(ctx, f, names, nil); err != nil {
		b.Fatal(err)
	}
	var entries []chain.Entry
	for _, name := range names {
		for e, err := range db.Entries(ctx, name, 1) {
			if err != nil {
				b.Fatal(err)
			}
			entries = append(entries, e)
		}
	}
	return path, entries
}

// BenchmarkImport imports an export through the command, beside a baseline
// that appends the same entries with Tx.AppendEntry in transactions of the
// same size: the ratio is the price of verifying and checking the file.
func BenchmarkImport(b *testing.B) {
	export, entries := benchmarkExport(b)
	ctx := context.Background()
	var command, baseline time.Duration
	for i := 0; b.Loop(); i++ {
		dir := b.TempDir()
		start := time.Now()
		var stdout, stderr bytes.Buffer
		a := &app{environment: func(string) string { return "" }}
		if code := execute(ctx, a, []string{"--db", filepath.Join(dir, "cli.db"), "import", "--file", export}, strings.NewReader(""), &stdout, &stderr); code != 0 {
			b.Fatalf("import: exit %d: %s", code, stderr.String())
		}
		command += time.Since(start)

		start = time.Now()
		db, err := chain.Open(filepath.Join(dir, "raw.db"), chain.Options{})
		if err != nil {
			b.Fatal(err)
		}
		for from := 0; from < len(entries); from += importBatchEntriesMax {
			batch := entries[from:min(from+importBatchEntriesMax, len(entries))]
			err := db.Update(ctx, func(tx *chain.Tx) error {
				for _, e := range batch {
					if err := tx.AppendEntry(e); err != nil {
						return err
					}
				}
				return nil
			})
			if err != nil {
				b.Fatal(err)
			}
		}
		if err := db.Close(); err != nil {
			b.Fatal(err)
		}
		baseline += time.Since(start)
	}
	b.ReportMetric(float64(benchmarkEntries)*float64(b.N)/command.Seconds(), "entries/s")
	b.ReportMetric(float64(benchmarkEntries)*float64(b.N)/baseline.Seconds(), "baseline-entries/s")
	b.ReportMetric(command.Seconds()/baseline.Seconds(), "x-baseline")
}

// BenchmarkVerifyFile verifies an export through the command, beside a
// baseline that calls chain.VerifyExport on the same file: the ratio is the
// command's own overhead.
func BenchmarkVerifyFile(b *testing.B) {
	export, _ := benchmarkExport(b)
	ctx := context.Background()
	var command, baseline time.Duration
	for b.Loop() {
		start := time.Now()
		var stdout, stderr bytes.Buffer
		a := &app{environment: func(string) string { return "" }}
		if code := execute(ctx, a, []string{"verify", "--file", export}, strings.NewReader(""), &stdout, &stderr); code != 0 {
			b.Fatalf("verify: exit %d: %s", code, stderr.String())
		}
		command += time.Since(start)

		start = time.Now()
		f, err := os.Open(export)
		if err != nil {
			b.Fatal(err)
		}
		report, err := chain.VerifyExport(ctx, f, chain.VerifyOptions{})
		f.Close()
		if err != nil || !report.OK() {
			b.Fatalf("%+v %v", report, err)
		}
		baseline += time.Since(start)
	}
	b.ReportMetric(float64(benchmarkEntries)*float64(b.N)/command.Seconds(), "entries/s")
	b.ReportMetric(command.Seconds()/baseline.Seconds(), "x-baseline")
}
