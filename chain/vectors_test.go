package chain_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/zeebo/blake3"

	"github.com/ledgerworks/ledger/chain"
	"github.com/ledgerworks/ledger/chain/internal/vectors"
	"github.com/ledgerworks/ledger/storage"
	"github.com/ledgerworks/ledger/storage/bolt"
)

// moduleRoot is where the generated files live, seen from this package.
const moduleRoot = ".."

// The committed vectors and seeds are exactly what the generator writes:
// none differs, none is missing, none is stale.
func TestVectorsMatchTheGenerator(t *testing.T) {
	files := vectors.Files()
	for name, want := range files {
		got, err := os.ReadFile(filepath.Join(moduleRoot, filepath.FromSlash(name)))
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("%s differs from the generator's output (%v); run go run ./chain/internal/vectorgen", name, err)
		}
	}
	for _, dir := range []string{vectors.VectorsDir, vectors.FuzzDir} {
		err := filepath.WalkDir(filepath.Join(moduleRoot, dir), func(p string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			rel, _ := filepath.Rel(moduleRoot, p)
			rel = filepath.ToSlash(rel)
			generated := dir == vectors.VectorsDir || strings.HasPrefix(d.Name(), vectors.SeedPrefix)
			if _, ok := files[rel]; generated && !ok {
				t.Errorf("%s is not produced by the generator", rel)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
}

// The auditor's view: Format v1 written out from docs/FORMAT.md with the
// blake3 package, sharing no code with the engine.
func auditLP(b []byte) []byte {
	return append(binary.BigEndian.AppendUint32(nil, uint32(len(b))), b...)
}

func auditGenesisPreimage(chainID string) []byte {
	return append([]byte("ledger/genesis/v1\x00"), auditLP([]byte(chainID))...)
}

func auditEntryPreimage(v entryVectorJSON, payload []byte, prev []byte) []byte {
	b := []byte("ledger/entry/v1\x00")
	b = binary.BigEndian.AppendUint64(b, v.Seq)
	b = append(b, prev...)
	b = binary.BigEndian.AppendUint64(b, uint64(v.TimeUnixNano))
	for _, field := range [][]byte{[]byte(v.Chain), []byte(v.IdempotencyKey), []byte(v.Type), payload} {
		b = append(b, auditLP(field)...)
	}
	return b
}

func auditFingerprintPreimage(typ string, payload []byte) []byte {
	return append(append([]byte("ledger/request/v1\x00"), auditLP([]byte(typ))...), auditLP(payload)...)
}

type entryVectorJSON struct {
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

func readVectors(t *testing.T, name string, into any) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(moduleRoot, vectors.VectorsDir, name))
	if err != nil {
		t.Fatal(err)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(into); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
}

func mustHex(t *testing.T, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(s)
	if err != nil {
		t.Fatalf("hex %q: %v", s, err)
	}
	return b
}

func mustBase64(t *testing.T, s string) []byte {
	t.Helper()
	b, err := base64.StdEncoding.Strict().DecodeString(s)
	if err != nil {
		t.Fatalf("base64 %q: %v", s, err)
	}
	return b
}

// checkHash compares a vector's preimage and hash with the auditor's
// computation and with the engine's.
func checkHash(t *testing.T, name string, preimage []byte, v struct{ preimageHex, hash string }, engine chain.Hash) {
	t.Helper()
	if got := hex.EncodeToString(preimage); got != v.preimageHex {
		t.Errorf("%s: preimage\n got  %s\n want %s", name, got, v.preimageHex)
	}
	if sum := blake3.Sum256(preimage); hex.EncodeToString(sum[:]) != v.hash {
		t.Errorf("%s: BLAKE3 of the preimage is %x, vector says %s", name, sum, v.hash)
	}
	if engine.String() != v.hash {
		t.Errorf("%s: engine computes %s, vector says %s", name, engine, v.hash)
	}
}

func TestGenesisVectors(t *testing.T) {
	var file struct {
		Description string
		Vectors     []struct {
			Name        string `json:"name"`
			Chain       string `json:"chain"`
			PreimageHex string `json:"preimage_hex"`
			Genesis     string `json:"genesis"`
		}
	}
	readVectors(t, "genesis.json", &file)
	if len(file.Vectors) < 4 {
		t.Fatalf("%d vectors", len(file.Vectors))
	}
	for _, v := range file.Vectors {
		checkHash(t, v.Name, auditGenesisPreimage(v.Chain), struct{ preimageHex, hash string }{v.PreimageHex, v.Genesis}, chain.Genesis(v.Chain))
	}
}

func TestEntryHashVectors(t *testing.T) {
	var file struct {
		Description string
		Vectors     []entryVectorJSON
	}
	readVectors(t, "entry-hash.json", &file)
	names := map[string]bool{}
	for _, v := range file.Vectors {
		names[v.Name] = true
		payload := mustBase64(t, v.PayloadBase64)
		prev := mustHex(t, v.PrevHash)
		e := chain.Entry{Chain: v.Chain, Seq: v.Seq, TimeUnixNano: v.TimeUnixNano, IdempotencyKey: v.IdempotencyKey, Type: v.Type, Payload: payload}
		copy(e.PrevHash[:], prev)
		checkHash(t, v.Name, auditEntryPreimage(v, payload, prev), struct{ preimageHex, hash string }{v.PreimageHex, v.Hash}, e.ComputeHash())
	}
	for _, want := range []string{"first-entry-with-key", "second-entry-without-key", "empty-payload", "multi-byte-utf8", "long-payload"} {
		if !names[want] {
			t.Errorf("vector %q missing", want)
		}
	}
	// The first two vectors form a chain: genesis, then a link.
	if file.Vectors[0].PrevHash != chain.Genesis(file.Vectors[0].Chain).String() || file.Vectors[1].PrevHash != file.Vectors[0].Hash {
		t.Error("the first two entry vectors are not linked")
	}
}

func TestFingerprintVectors(t *testing.T) {
	var file struct {
		Description string
		Vectors     []struct {
			Name          string `json:"name"`
			Type          string `json:"type"`
			PayloadBase64 string `json:"payload_base64"`
			PreimageHex   string `json:"preimage_hex"`
			Fingerprint   string `json:"fingerprint"`
		}
	}
	readVectors(t, "fingerprint.json", &file)
	seen := map[string]string{}
	for _, v := range file.Vectors {
		payload := mustBase64(t, v.PayloadBase64)
		checkHash(t, v.Name, auditFingerprintPreimage(v.Type, payload), struct{ preimageHex, hash string }{v.PreimageHex, v.Fingerprint},
			chain.Fingerprint(v.Type, payload))
		if other, ok := seen[v.Fingerprint]; ok {
			t.Errorf("%s and %s share a fingerprint", v.Name, other)
		}
		seen[v.Fingerprint] = v.Name
	}
}

func TestRecordVectors(t *testing.T) {
	var file struct {
		Description string
		Vectors     []struct {
			Name      string           `json:"name"`
			Chain     string           `json:"chain"`
			Seq       uint64           `json:"seq"`
			Entry     *entryVectorJSON `json:"entry"`
			RecordHex string           `json:"record_hex"`
			Error     string           `json:"error"`
		}
	}
	readVectors(t, "record.json", &file)
	refused := 0
	for _, v := range file.Vectors {
		rec := mustHex(t, v.RecordHex)
		e, err := chain.DecodeRecord(v.Chain, v.Seq, rec)
		if v.Error != "" {
			refused++
			if !errors.Is(err, chain.ErrCorrupt) || v.Error != string(chain.ReasonUndecodable) {
				t.Errorf("%s: %v, want it refused", v.Name, err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", v.Name, err)
			continue
		}
		want := v.Entry
		if e.Chain != want.Chain || e.Seq != want.Seq || e.PrevHash.String() != want.PrevHash || e.TimeUnixNano != want.TimeUnixNano ||
			e.IdempotencyKey != want.IdempotencyKey || e.Type != want.Type || !bytes.Equal(e.Payload, mustBase64(t, want.PayloadBase64)) ||
			e.Hash.String() != want.Hash || e.ComputeHash() != e.Hash {
			t.Errorf("%s: decodes to %+v, want %+v", v.Name, e, want)
		}
		if !bytes.Equal(chain.EncodeRecord(&e), rec) {
			t.Errorf("%s: re-encodes differently", v.Name)
		}
	}
	if refused == 0 {
		t.Error("no undecodable record vectors")
	}
}

func TestExportVectors(t *testing.T) {
	paths, err := filepath.Glob(filepath.Join(moduleRoot, vectors.VectorsDir, "export", "*.json"))
	if err != nil || len(paths) < 10 {
		t.Fatalf("%d export vectors, %v", len(paths), err)
	}
	for _, p := range paths {
		var c vectors.ExportCase
		readVectors(t, filepath.Join("export", filepath.Base(p)), &c)
		t.Run(c.Name, func(t *testing.T) {
			if c.Name+".json" != filepath.Base(p) {
				t.Fatalf("file %s holds case %q", p, c.Name)
			}
			var heads []chain.Head
			for _, h := range c.ExpectHeads {
				hash, err := chain.ParseHash(h.Hash)
				if err != nil {
					t.Fatal(err)
				}
				heads = append(heads, chain.Head{Chain: h.Chain, Seq: h.Seq, Hash: hash})
			}
			export := strings.Join(c.Lines, "\n") + "\n"
			report, err := chain.VerifyExport(context.Background(), strings.NewReader(export), chain.VerifyOptions{ExpectHeads: heads})
			if err != nil {
				t.Fatal(err)
			}
			want := make([]failureKey, 0, len(c.ExpectedFailures))
			for _, f := range c.ExpectedFailures {
				want = append(want, failureKey{f.Chain, f.Seq, chain.Reason(f.Reason)})
			}
			assertFailures(t, report.Failures, want...)
			if report.Err() == nil && len(want) > 0 {
				t.Fatal("report has failures but no error")
			}
		})
	}
}

// A ledger whose records are stored straight through the storage contract
// from the valid export vector verifies, and exports the vector again byte
// for byte.
func TestValidExportVectorReExports(t *testing.T) {
	var c vectors.ExportCase
	readVectors(t, "export/valid.json", &c)
	path := filepath.Join(t.TempDir(), "ledger.db")
	backend, err := bolt.Open(path, bolt.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	stx, err := backend.Begin(ctx, true)
	if err != nil {
		t.Fatal(err)
	}
	var chains []string
	for _, l := range c.Lines {
		e, err := chain.DecodeExportLine([]byte(l))
		if err != nil {
			t.Fatal(err)
		}
		rec := storage.Record{Seq: e.Seq, IdempotencyKey: e.IdempotencyKey, Data: chain.EncodeRecord(&e)}
		if err := stx.Append(ctx, e.Chain, rec, storage.Head{Seq: e.Seq, Hash: e.Hash, TimeUnixNano: e.TimeUnixNano}); err != nil {
			t.Fatal(err)
		}
		if len(chains) == 0 || chains[len(chains)-1] != e.Chain {
			chains = append(chains, e.Chain)
		}
	}
	if err := stx.Commit(); err != nil {
		t.Fatal(err)
	}
	db, err := chain.OpenBackend(backend, chain.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	assertVerifies(t, db)
	if got := string(exportAll(t, db, chains...)); got != strings.Join(c.Lines, "\n")+"\n" {
		t.Fatalf("re-export differs:\n%s", got)
	}
}
