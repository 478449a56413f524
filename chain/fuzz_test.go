package chain_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"slices"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	"github.com/ledgerworks/ledger/chain"
)

// Seed corpora live in testdata/fuzz/<FuzzName>/ (the vector-* files are
// written by go run ./chain/internal/vectorgen). Run one target with e.g.
//
//	go test ./chain -run '^$' -fuzz '^FuzzDecodeRecord$' -fuzztime 30s

// FuzzDecodeRecord: any bytes either decode to an entry that encodes back to
// the same bytes, or are refused with a *DecodeError; never a panic.
func FuzzDecodeRecord(f *testing.F) {
	e := sampleEntry()
	f.Add(chain.EncodeRecord(&e))
	f.Fuzz(func(t *testing.T, data []byte) {
		got, err := chain.DecodeRecord("c", 1, data)
		if err != nil {
			var decodeErr *chain.DecodeError
			if !errors.As(err, &decodeErr) || !errors.Is(err, chain.ErrCorrupt) {
				t.Fatalf("error %v is not a *DecodeError", err)
			}
			return
		}
		if again := chain.EncodeRecord(&got); !bytes.Equal(again, data) {
			t.Fatalf("accepted record re-encodes differently:\n%x\n%x", data, again)
		}
		if chain.ValidateStoredRequest(chain.Request{Chain: "c", IdempotencyKey: got.IdempotencyKey, Type: got.Type}, 0) != nil {
			t.Fatalf("accepted record holds a field the limits refuse: %+v", got)
		}
	})
}

// FuzzRecordKey: RecordKey never panics, finds the key of every record
// DecodeRecord accepts (none for an empty key), and finds it where the
// record format puts it, right after the fixed fields and its length.
func FuzzRecordKey(f *testing.F) {
	e := sampleEntry()
	f.Add(chain.EncodeRecord(&e))
	e.IdempotencyKey = ""
	f.Add(chain.EncodeRecord(&e))
	f.Fuzz(func(t *testing.T, data []byte) {
		key, ok := chain.RecordKey(data)
		if got, err := chain.DecodeRecord("c", 1, data); err == nil {
			if ok != (got.IdempotencyKey != "") || string(key) != got.IdempotencyKey {
				t.Fatalf("RecordKey = %q, %v; the record decodes with key %q", key, ok, got.IdempotencyKey)
			}
		}
		if !ok {
			return
		}
		const fieldsOffset = 1 + 8 + 2*chain.HashSize
		n := len(key)
		if n == 0 || n > chain.IdempotencyKeyLengthMax || len(data) < fieldsOffset+4+n ||
			int(binary.BigEndian.Uint32(data[fieldsOffset:])) != n || !bytes.Equal(data[fieldsOffset+4:fieldsOffset+4+n], key) {
			t.Fatalf("RecordKey = %q from %x: not the length-prefixed key after the fixed fields", key, data)
		}
	})
}

// FuzzDecodeExportLine: an accepted line is the canonical spelling of its
// entry, so it re-encodes to itself; everything else matches ErrCorrupt.
func FuzzDecodeExportLine(f *testing.F) {
	e := sampleEntry()
	f.Add(bytes.TrimSuffix(chain.AppendExportLine(nil, &e), []byte("\n")))
	f.Add(bytes.ReplaceAll(bytes.TrimSuffix(chain.AppendExportLine(nil, &e), []byte("\n")), []byte(`":`), []byte(`": `)))
	f.Fuzz(func(t *testing.T, line []byte) {
		got, err := chain.DecodeExportLine(line)
		if err != nil {
			if !errors.Is(err, chain.ErrCorrupt) {
				t.Fatalf("error %v does not match ErrCorrupt", err)
			}
			return
		}
		if again := chain.AppendExportLine(nil, &got); !bytes.Equal(again, append(bytes.Clone(line), '\n')) {
			t.Fatalf("accepted line re-encodes differently:\n%s\n%s", line, again)
		}
		if got.Seq == 0 {
			t.Fatal("seq 0 accepted")
		}
		req := chain.Request{Chain: got.Chain, IdempotencyKey: got.IdempotencyKey, Type: got.Type, Payload: got.Payload}
		if err := chain.ValidateStoredRequest(req, chain.PayloadSizeLimit); err != nil {
			t.Fatalf("accepted line breaks a limit: %v", err)
		}
	})
}

// FuzzVerifyExport: any input yields a report, never a panic or an
// operating error; a report without failures means every line decoded and
// hashed.
func FuzzVerifyExport(f *testing.F) {
	e := sampleEntry()
	f.Add(chain.AppendExportLine(nil, &e))
	f.Add(append(chain.AppendExportLine(nil, &e), "\n\n"...))
	f.Add(bytes.ReplaceAll(chain.AppendExportLine(nil, &e), []byte("\n"), []byte("\r\n")))
	f.Add(append([]byte("\n"), chain.AppendExportLine(nil, &e)...))
	f.Fuzz(func(t *testing.T, export []byte) {
		report, err := chain.VerifyExport(context.Background(), bytes.NewReader(export), chain.VerifyOptions{})
		if err != nil {
			t.Fatalf("operating error on in-memory input: %v", err)
		}
		if !report.OK() {
			return
		}
		r := chain.NewExportReader(bytes.NewReader(export))
		var n int64
		for {
			e, err := r.Next()
			if err != nil {
				break
			}
			if e.ComputeHash() != e.Hash {
				t.Fatalf("report OK but line %d does not hash", r.Line())
			}
			n++
		}
		if n != report.Entries {
			t.Fatalf("report counts %d entries, the reader %d", report.Entries, n)
		}
	})
}

// validText is an independent statement of the text limits.
func validText(s string, lengthMin, lengthMax int) bool {
	return len(s) >= lengthMin && len(s) <= lengthMax && utf8.ValidString(s) && !strings.ContainsFunc(s, unicode.IsControl)
}

// safeName states the rules for new names independently of naming.go: no
// format character, and for a chain id no leading separator and no empty,
// "." or ".." component.
func safeName(s string, isChain bool) bool {
	if strings.ContainsFunc(s, func(r rune) bool { return unicode.In(r, unicode.Cf) }) {
		return false
	}
	return !isChain || !slices.ContainsFunc(strings.Split(s, chain.NameSeparator), func(c string) bool {
		return c == "" || c == "." || c == ".."
	})
}

// FuzzValidateRequest compares ValidateRequest and ValidateStoredRequest
// with the limits and the rules for new names stated independently, and
// checks that every accepted request survives the record and export
// encodings.
func FuzzValidateRequest(f *testing.F) {
	f.Add("c", "k", "t/v1", []byte("p"))
	f.Add("acme/../x", "k\u202e", "t\u200b/v1", []byte("p"))
	f.Fuzz(func(t *testing.T, chainID, key, typ string, payload []byte) {
		const payloadSizeMax = 64
		req := chain.Request{Chain: chainID, IdempotencyKey: key, Type: typ, Payload: payload}
		storedErr := chain.ValidateStoredRequest(req, payloadSizeMax)
		wantStored := validText(chainID, 1, chain.ChainLengthMax) && validText(key, 0, chain.IdempotencyKeyLengthMax) &&
			validText(typ, 1, chain.TypeLengthMax) && len(payload) <= payloadSizeMax
		if (storedErr == nil) != wantStored {
			t.Fatalf("ValidateStoredRequest(%q, %q, %q, %d bytes) = %v, want valid %v", chainID, key, typ, len(payload), storedErr, wantStored)
		}
		err := chain.ValidateRequest(req, payloadSizeMax)
		want := wantStored && safeName(chainID, true) && safeName(key, false) && safeName(typ, false)
		if (err == nil) != want {
			t.Fatalf("ValidateRequest(%q, %q, %q, %d bytes) = %v, want valid %v", chainID, key, typ, len(payload), err, want)
		}
		if wantStored && !want && !errors.Is(err, chain.ErrUnsafeName) {
			t.Fatalf("ValidateRequest(%q, %q, %q): %v does not match ErrUnsafeName", chainID, key, typ, err)
		}
		if storedErr != nil {
			var invalid *chain.InvalidError
			if !errors.Is(storedErr, chain.ErrInvalid) || !errors.As(storedErr, &invalid) {
				t.Fatalf("error %v is not an *InvalidError", storedErr)
			}
			return
		}
		e := chain.Entry{Chain: chainID, Seq: 1, PrevHash: chain.Genesis(chainID), IdempotencyKey: key, Type: typ, Payload: payload}
		e.Hash = e.ComputeHash()
		fromRecord, err := chain.DecodeRecord(chainID, 1, chain.EncodeRecord(&e))
		if err != nil || !equalEntries(fromRecord, withPayload(e)) {
			t.Fatalf("record round trip: %+v %v", fromRecord, err)
		}
		exportLine := chain.AppendExportLine(nil, &e)
		fromLine, err := chain.DecodeExportLine(bytes.TrimSuffix(exportLine, []byte("\n")))
		if err != nil || !equalEntries(fromLine, withPayload(e)) {
			t.Fatalf("export round trip of %s: %+v %v", exportLine, fromLine, err)
		}
	})
}

// withPayload replaces a nil payload with an empty one, as decoding does.
func withPayload(e chain.Entry) chain.Entry {
	if e.Payload == nil {
		e.Payload = []byte{}
	}
	return e
}

// FuzzScopedName: an accepted name splits back into its components and is a
// valid chain id; a component with the separator is always refused.
func FuzzScopedName(f *testing.F) {
	f.Add("acme", "stock", "SKU-1")
	f.Add("acme", "stock", "..")
	f.Fuzz(func(t *testing.T, tenant, domain, part string) {
		name, err := chain.ScopedName(tenant, domain, part)
		hasSeparator := strings.Contains(tenant+domain+part, chain.NameSeparator)
		if err != nil {
			if !errors.Is(err, chain.ErrInvalidChain) || name != "" {
				t.Fatalf("refusal %q %v", name, err)
			}
			return
		}
		if hasSeparator {
			t.Fatalf("components with %q accepted: %q", chain.NameSeparator, name)
		}
		if got := chain.SplitScopedName(name); len(got) != 3 || got[0] != tenant || got[1] != domain || got[2] != part {
			t.Fatalf("%q splits into %q", name, got)
		}
		if !safeName(name, true) {
			t.Fatalf("%q breaks a rule for new names", name)
		}
		if err := chain.ValidateRequest(chain.Request{Chain: name, Type: "t"}, 0); err != nil {
			t.Fatalf("%q: %v", name, err)
		}
	})
}
