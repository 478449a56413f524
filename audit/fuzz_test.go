package audit_test

import (
	"os"
	"path/filepath"
	"testing"

	"encoding/json"

	"github.com/ledgerworks/ledger/audit"
)

// seeds adds the proofs of the vectors of a feature.
func seeds(f *testing.F, feature string) {
	files, _ := filepath.Glob(filepath.Join(vectorsDir, feature, "*.json"))
	for _, file := range files {
		b, err := os.ReadFile(file)
		if err != nil {
			f.Fatal(err)
		}
		var v vector
		if err := json.Unmarshal(b, &v); err != nil {
			f.Fatal(err)
		}
		f.Add([]byte(v.Proof))
	}
}

func FuzzParseEntryProof(f *testing.F) {
	seeds(f, "entry")
	f.Fuzz(func(t *testing.T, b []byte) {
		p, err := audit.ParseEntryProof(b)
		if err != nil {
			return
		}
		audit.VerifyEntryProof(p, testVerifier) // must not panic, whatever the proof
	})
}

func FuzzParseConsistencyProof(f *testing.F) {
	seeds(f, "consistency")
	f.Fuzz(func(t *testing.T, b []byte) {
		p, err := audit.ParseConsistencyProof(b)
		if err != nil {
			return
		}
		audit.VerifyConsistencyProof(p, testVerifier)
	})
}
