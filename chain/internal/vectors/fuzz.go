package vectors

import (
	"encoding/hex"
	"fmt"
	"path"
	"strings"

	"github.com/ledgerworks/ledger/chain"
)

// corpusFile spells values in the format of go test's seed corpus files.
func corpusFile(values ...any) []byte {
	var b strings.Builder
	b.WriteString("go test fuzz v1\n")
	for _, v := range values {
		switch v := v.(type) {
		case []byte:
			fmt.Fprintf(&b, "[]byte(%q)\n", v)
		case string:
			fmt.Fprintf(&b, "string(%q)\n", v)
		case uint64:
			fmt.Fprintf(&b, "uint64(%d)\n", v)
		default:
			panic(fmt.Sprintf("corpus value of type %T", v))
		}
	}
	return []byte(b.String())
}

// fuzzSeeds returns the seed corpora of the chain package's fuzz targets,
// by path under FuzzDir: the records, export lines and exports of the
// vectors, valid and broken. Every name starts with "vector-", which tells
// them from inputs the fuzzer saves beside them.
func fuzzSeeds() map[string][]byte {
	seeds := map[string][]byte{}
	for _, v := range recordFile().Vectors {
		rec, err := hex.DecodeString(v.RecordHex)
		if err != nil {
			panic(err)
		}
		seeds[path.Join("FuzzDecodeRecord", "vector-"+v.Name)] = corpusFile(rec)
		seeds[path.Join("FuzzDecodeFields", "vector-"+v.Name)] = corpusFile(rec, v.Seq)
	}
	seen := map[string]bool{}
	for _, c := range exportCases() {
		export := strings.Join(c.Lines, "\n") + "\n"
		seeds[path.Join("FuzzVerifyExport", "vector-"+c.Name)] = corpusFile([]byte(export))
		for i, l := range c.Lines {
			if seen[l] {
				continue
			}
			seen[l] = true
			seeds[path.Join("FuzzDecodeExportLine", fmt.Sprintf("vector-%s-%d", c.Name, i+1))] = corpusFile([]byte(l))
		}
	}
	for _, s := range sampleEntries() {
		e := s.e
		seeds[path.Join("FuzzValidateRequest", "vector-"+s.name)] = corpusFile(e.Chain, e.IdempotencyKey, e.Type, e.Payload)
	}
	for name, values := range map[string][]any{
		"empty":           {"", "", "", []byte{}},
		"control":         {"c\n", "k\x00", "t\x7f", []byte{}},
		"invalid-utf8":    {"c\xff", "\xc3", "t", []byte("p")},
		"too-long":        {strings.Repeat("c", chain.ChainLengthMax+1), strings.Repeat("k", chain.IdempotencyKeyLengthMax+1), strings.Repeat("t", chain.TypeLengthMax+1), []byte{}},
		"dot-dot":         {"..", "k", "t", []byte("p")},
		"root-path":       {"/etc/passwd", "k", "t", []byte("p")},
		"empty-component": {"acme//x", "k", "t", []byte("p")},
		"trailing-slash":  {"acme/", "k", "t", []byte("p")},
		"dot-component":   {"acme/./x", "k", "t", []byte("p")},
		"bidi-override":   {"acme/\u202egpj.exe", "order-\u202e1", "t\u202e/v1", []byte("p")},
		"format-chars":    {"ac\u200bme", "\ufeffk", "t\u00ad/v1", []byte("p")},
	} {
		seeds[path.Join("FuzzValidateRequest", "vector-"+name)] = corpusFile(values...)
	}
	for name, values := range map[string][]any{
		"typical":        {"acme", "stock", "SKU-1"},
		"slash":          {"acme/evil", "stock", "x"},
		"empty-part":     {"acme", "stock", ""},
		"multi-byte":     {"ünï", "fin", "日本😀"},
		"long-component": {strings.Repeat("t", chain.NameComponentLengthMax+1), "val", "x"},
		"dot":            {"acme", "stock", "."},
		"dot-dot":        {"..", "stock", "x"},
		"bidi-override":  {"acme", "stock", "SKU\u202e1"},
		"zero-width":     {"ac\u200dme", "fin", "x"},
		"dots-inside":    {"acme", "stock", "a..b"},
	} {
		seeds[path.Join("FuzzScopedName", "vector-"+name)] = corpusFile(values...)
	}
	return seeds
}
