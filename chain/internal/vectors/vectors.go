// Package vectors produces the Format v1 test vectors under
// testdata/vectors and the seed corpora of the chain package's fuzz targets.
// The files are generated (go run ./chain/internal/vectorgen) and committed;
// a test in package chain checks that the committed files equal Files(), so
// they cannot drift from the code.
//
// Every hash vector carries the exact bytes that are hashed (preimage_hex),
// so that an independent implementation can find where it differs. Every
// export vector lists the failures a verifier must report.
package vectors

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"path"
	"strings"

	"github.com/zeebo/blake3"

	"github.com/ledgerworks/ledger/chain"
)

// Directories of the generated files, relative to the module root.
const (
	VectorsDir = "testdata/vectors"
	FuzzDir    = "chain/testdata/fuzz"
	// SeedPrefix starts the name of every generated fuzz seed.
	SeedPrefix = "vector-"
)

// Files returns every generated file by its path relative to the module root.
func Files() map[string][]byte {
	files := map[string][]byte{}
	put := func(name string, v any) {
		b, err := json.MarshalIndent(v, "", "  ")
		if err != nil {
			panic(err) // only plain structs are marshaled
		}
		files[path.Join(VectorsDir, name)] = append(b, '\n')
	}
	put("genesis.json", genesisFile())
	put("entry-hash.json", entryHashFile())
	put("fingerprint.json", fingerprintFile())
	put("record.json", recordFile())
	for _, c := range exportCases() {
		put(path.Join("export", c.Name+".json"), c)
	}
	for name, content := range fuzzSeeds() {
		files[path.Join(FuzzDir, name)] = content
	}
	return files
}

// lp is Format v1's length prefix: 4-byte big-endian length, then the bytes.
func lp(b []byte) []byte {
	n := len(b)
	return append([]byte{byte(n >> 24), byte(n >> 16), byte(n >> 8), byte(n)}, b...)
}

func u64be(v uint64) []byte {
	b := make([]byte, 8)
	for i := range 8 {
		b[i] = byte(v >> (56 - 8*i))
	}
	return b
}

// The preimages are written out here independently of chain/entry.go, and
// checked against it below, so a vector can only be produced when the two
// agree.
func genesisPreimage(chainID string) []byte {
	return bytes.Join([][]byte{[]byte("ledger/genesis/v1"), {0}, lp([]byte(chainID))}, nil)
}

func entryPreimage(e *chain.Entry) []byte {
	return bytes.Join([][]byte{[]byte("ledger/entry/v1"), {0}, u64be(e.Seq), e.PrevHash[:], u64be(uint64(e.TimeUnixNano)),
		lp([]byte(e.Chain)), lp([]byte(e.IdempotencyKey)), lp([]byte(e.Type)), lp(e.Payload)}, nil)
}

func fingerprintPreimage(typ string, payload []byte) []byte {
	return bytes.Join([][]byte{[]byte("ledger/request/v1"), {0}, lp([]byte(typ)), lp(payload)}, nil)
}

type genesisVector struct {
	Name        string `json:"name"`
	Chain       string `json:"chain"`
	PreimageHex string `json:"preimage_hex"`
	Genesis     string `json:"genesis"`
}

type vectorFile[T any] struct {
	Description string `json:"description"`
	Vectors     []T    `json:"vectors"`
}

func genesisFile() vectorFile[genesisVector] {
	f := vectorFile[genesisVector]{Description: "genesis(chain) = BLAKE3-256(\"ledger/genesis/v1\" || 0x00 || lp(chain)): " +
		"the prev_hash of a chain's first entry. lp(x) is the 4-byte big-endian length of x followed by x."}
	for _, c := range []struct{ name, chain string }{
		{"single-byte", "a"},
		{"scoped", "acme/stock/SKU-1/WH-1"},
		{"multi-byte-utf8", "ünïcødé/日本/😀"},
		{"longest", strings.Repeat("c", chain.ChainLengthMax)},
	} {
		pre := genesisPreimage(c.chain)
		g := chain.Genesis(c.chain)
		mustEqual(hashOf(pre), g, "genesis "+c.name)
		f.Vectors = append(f.Vectors, genesisVector{c.name, c.chain, hex.EncodeToString(pre), g.String()})
	}
	return f
}

type entryVector struct {
	Name           string `json:"name"`
	Chain          string `json:"chain"`
	Seq            uint64 `json:"seq"`
	PrevHash       string `json:"prev_hash"`
	TimeUnixNano   int64  `json:"time_unix_nano"`
	IdempotencyKey string `json:"idempotency_key"`
	Type           string `json:"type"`
	PayloadBase64  string `json:"payload_base64"`
	PreimageHex    string `json:"preimage_hex"`
	Hash           string `json:"hash"`
}

// longPayload spans several 1 KiB BLAKE3 chunks.
func longPayload() []byte {
	b := make([]byte, 5000)
	for i := range b {
		b[i] = byte(i * 7)
	}
	return b
}

func sampleEntries() []struct {
	name string
	e    chain.Entry
} {
	first := chain.Entry{Chain: "acme/stock/SKU-1", Seq: 1, PrevHash: chain.Genesis("acme/stock/SKU-1"),
		TimeUnixNano: 1_764_000_000_000_000_000, IdempotencyKey: "receipt-42", Type: "stock.movement/v1",
		Payload: []byte(`{"qty":"10","location":"WH-1"}`)}
	first.Hash = first.ComputeHash()
	return []struct {
		name string
		e    chain.Entry
	}{
		{"first-entry-with-key", first},
		{"second-entry-without-key", chain.Entry{Chain: first.Chain, Seq: 2, PrevHash: first.Hash,
			TimeUnixNano: 1_764_000_000_500_000_000, Type: "stock.movement/v1", Payload: []byte(`{"qty":"-3"}`)}},
		{"empty-payload", chain.Entry{Chain: "a", Seq: 1, PrevHash: chain.Genesis("a"), TimeUnixNano: 1, Type: "t"}},
		{"multi-byte-utf8", chain.Entry{Chain: "ünïcødé/日本/😀", Seq: 7, PrevHash: chain.Genesis("x"),
			TimeUnixNano: 1_764_000_000_000_000_001, IdempotencyKey: "ключ-1", Type: "類型/v1", Payload: []byte("naïve ☃")}},
		{"long-payload", chain.Entry{Chain: "a", Seq: 2, PrevHash: chain.Genesis("a"), TimeUnixNano: 2,
			IdempotencyKey: strings.Repeat("k", chain.IdempotencyKeyLengthMax), Type: strings.Repeat("t", chain.TypeLengthMax),
			Payload: longPayload()}},
		{"binary-payload", chain.Entry{Chain: "a", Seq: 3, PrevHash: chain.Genesis("a"), TimeUnixNano: 3, Type: "t",
			Payload: []byte{0, 0xff, 0x80, 0x0a, 0x22, 0x5c}}},
		{"negative-time-and-large-seq", chain.Entry{Chain: "a", Seq: 1<<64 - 1, PrevHash: chain.Genesis("a"),
			TimeUnixNano: -1, Type: "t", Payload: []byte("x")}},
		{"quotes-and-backslashes", chain.Entry{Chain: `quote"back\slash`, Seq: 1, PrevHash: chain.Genesis(`quote"back\slash`),
			TimeUnixNano: 4, IdempotencyKey: `k"\`, Type: `t<&>/v1`, Payload: []byte(`"\`)}},
	}
}

func entryHashFile() vectorFile[entryVector] {
	f := vectorFile[entryVector]{Description: "hash = BLAKE3-256(\"ledger/entry/v1\" || 0x00 || u64be(seq) || prev_hash (32 bytes) || " +
		"i64be(time_unix_nano) || lp(chain) || lp(idempotency_key) || lp(type) || lp(payload)). An empty key is lp(\"\"). " +
		"Hashes are 64 lowercase hex digits, payloads standard padded base64."}
	for _, s := range sampleEntries() {
		e := s.e
		e.Hash = e.ComputeHash()
		pre := entryPreimage(&e)
		mustEqual(hashOf(pre), e.Hash, "entry "+s.name)
		f.Vectors = append(f.Vectors, entryVector{Name: s.name, Chain: e.Chain, Seq: e.Seq, PrevHash: e.PrevHash.String(),
			TimeUnixNano: e.TimeUnixNano, IdempotencyKey: e.IdempotencyKey, Type: e.Type,
			PayloadBase64: base64.StdEncoding.EncodeToString(e.Payload), PreimageHex: hex.EncodeToString(pre), Hash: e.Hash.String()})
	}
	return f
}

type fingerprintVector struct {
	Name          string `json:"name"`
	Type          string `json:"type"`
	PayloadBase64 string `json:"payload_base64"`
	PreimageHex   string `json:"preimage_hex"`
	Fingerprint   string `json:"fingerprint"`
}

func fingerprintFile() vectorFile[fingerprintVector] {
	f := vectorFile[fingerprintVector]{Description: "fingerprint = BLAKE3-256(\"ledger/request/v1\" || 0x00 || lp(type) || lp(payload)). " +
		"Two appends with one idempotency key are the same request exactly when their fingerprints are equal; " +
		"the last two vectors hold the same bytes split differently and must differ."}
	for _, c := range []struct {
		name    string
		typ     string
		payload []byte
	}{
		{"typical", "stock.movement/v1", []byte(`{"qty":"10","location":"WH-1"}`)},
		{"empty-payload", "t", nil},
		{"multi-byte-utf8", "類型/v1", []byte("naïve ☃")},
		{"long-payload", "t", longPayload()},
		{"split-type-ab-payload-c", "ab", []byte("c")},
		{"split-type-a-payload-bc", "a", []byte("bc")},
	} {
		pre := fingerprintPreimage(c.typ, c.payload)
		fp := chain.Fingerprint(c.typ, c.payload)
		mustEqual(hashOf(pre), fp, "fingerprint "+c.name)
		f.Vectors = append(f.Vectors, fingerprintVector{c.name, c.typ, base64.StdEncoding.EncodeToString(c.payload),
			hex.EncodeToString(pre), fp.String()})
	}
	return f
}

type recordVector struct {
	Name  string       `json:"name"`
	Chain string       `json:"chain"`
	Seq   uint64       `json:"seq"`
	Entry *entryVector `json:"entry,omitempty"`
	// RecordHex is the value stored under (chain, seq).
	RecordHex string `json:"record_hex"`
	// Error is "undecodable" when the record must be refused.
	Error string `json:"error,omitempty"`
}

func recordFile() vectorFile[recordVector] {
	f := vectorFile[recordVector]{Description: "The stored record of an entry (the bbolt backend stores it under chain id and seq, " +
		"which are not in the record): u8 version=1 || i64be(time_unix_nano) || prev_hash (32) || hash (32) || " +
		"lp(idempotency_key) || lp(type) || lp(payload). Records marked \"undecodable\" must be refused."}
	var good []byte
	for _, s := range sampleEntries() {
		e := s.e
		e.Hash = e.ComputeHash()
		rec := chain.EncodeRecord(&e)
		if good == nil {
			good = rec
		}
		f.Vectors = append(f.Vectors, recordVector{Name: s.name, Chain: e.Chain, Seq: e.Seq,
			Entry: &entryVector{Chain: e.Chain, Seq: e.Seq, PrevHash: e.PrevHash.String(), TimeUnixNano: e.TimeUnixNano,
				IdempotencyKey: e.IdempotencyKey, Type: e.Type, PayloadBase64: base64.StdEncoding.EncodeToString(e.Payload),
				Hash: e.Hash.String()},
			RecordHex: hex.EncodeToString(rec)})
	}
	edit := func(f func(b []byte) []byte) []byte { return f(bytes.Clone(good)) }
	for _, c := range []struct {
		name string
		rec  []byte
	}{
		{"empty", []byte{}},
		{"truncated", good[:len(good)-1]},
		{"fixed-part-only", good[:1+8+32+32]},
		{"trailing-byte", append(bytes.Clone(good), 0)},
		{"version-2", edit(func(b []byte) []byte { b[0] = 2; return b })},
		{"key-length-past-end", edit(func(b []byte) []byte { b[73] = 0x7f; return b })},
		{"empty-type", chain.EncodeRecord(&chain.Entry{Chain: "a", Seq: 1})},
		{"control-character-in-type", chain.EncodeRecord(&chain.Entry{Chain: "a", Seq: 1, Type: "t\n"})},
	} {
		if _, err := chain.DecodeRecord("a", 1, c.rec); err == nil {
			panic("record vector " + c.name + " decodes")
		}
		f.Vectors = append(f.Vectors, recordVector{Name: c.name, Chain: "a", Seq: 1, RecordHex: hex.EncodeToString(c.rec), Error: "undecodable"})
	}
	return f
}

// hashOf is BLAKE3-256 computed by the blake3 package itself, not through
// the engine's functions.
func hashOf(preimage []byte) chain.Hash { return blake3.Sum256(preimage) }

func mustEqual(independent, engine chain.Hash, what string) {
	if independent != engine {
		panic(fmt.Sprintf("%s: the engine's hash %s differs from the hash of the written-out preimage %s", what, engine, independent))
	}
}
