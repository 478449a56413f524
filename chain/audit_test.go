package chain_test

import (
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/zeebo/blake3"

	"github.com/ledgerworks/ledger/chain"
	"github.com/ledgerworks/ledger/chain/internal/vectors"
)

// auditLine is an export line as the recipe of docs/FORMAT.md reads it.
type auditLine struct {
	Chain          string      `json:"chain"`
	Seq            json.Number `json:"seq"`
	TimeUnixNano   json.Number `json:"time_unix_nano"`
	IdempotencyKey string      `json:"idempotency_key"`
	Type           string      `json:"type"`
	Payload        string      `json:"payload"`
	PrevHash       string      `json:"prev_hash"`
	Hash           string      `json:"hash"`
}

// auditString spells a string as section Export says: only '"' and '\'
// escaped.
func auditString(s string) string {
	return `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(s) + `"`
}

// auditParse is step 1 of the recipe: parse, decode, and check that the
// line is spelled exactly as the format says.
func auditParse(text string) (l auditLine, seq uint64, timeUnixNano int64, payload, prev, hash []byte, ok bool) {
	if json.Unmarshal([]byte(text), &l) != nil {
		return l, 0, 0, nil, nil, nil, false
	}
	seq, errSeq := strconv.ParseUint(l.Seq.String(), 10, 64)
	timeUnixNano, errTime := strconv.ParseInt(l.TimeUnixNano.String(), 10, 64)
	payload, errPayload := base64.StdEncoding.Strict().DecodeString(l.Payload)
	prev, errPrev := hex.DecodeString(l.PrevHash)
	hash, errHash := hex.DecodeString(l.Hash)
	if errSeq != nil || errTime != nil || errPayload != nil || errPrev != nil || errHash != nil || len(prev) != 32 || len(hash) != 32 {
		return l, 0, 0, nil, nil, nil, false
	}
	spelled := `{"chain":` + auditString(l.Chain) + `,"seq":` + strconv.FormatUint(seq, 10) +
		`,"time_unix_nano":` + strconv.FormatInt(timeUnixNano, 10) + `,"idempotency_key":` + auditString(l.IdempotencyKey) +
		`,"type":` + auditString(l.Type) + `,"payload":"` + base64.StdEncoding.EncodeToString(payload) +
		`","prev_hash":"` + hex.EncodeToString(prev) + `","hash":"` + hex.EncodeToString(hash) + `"}`
	return l, seq, timeUnixNano, payload, prev, hash, spelled == text && l.Chain != "" && l.Type != "" && seq > 0
}

// auditVerify follows "Re-verifying an export independently" in
// docs/FORMAT.md step by step, sharing no code with the engine.
func auditVerify(lines []string, heads []vectors.HeadJSON) []failureKey {
	var failures []failureKey
	fail := func(chainID string, seq uint64, reason string) {
		failures = append(failures, failureKey{chainID, seq, reasonOf(reason)})
	}
	type chainState struct {
		expectedSeq  uint64
		expectedPrev []byte
	}
	states := map[string]*chainState{}
	held := map[string]map[uint64]string{} // chain → seq → hash, for step 5
	current := ""
	for len(lines) > 0 && lines[len(lines)-1] == "" { // step 1: empty lines at the end
		lines = lines[:len(lines)-1]
	}
	for _, text := range lines {
		l, seq, timeUnixNano, payload, prev, hash, ok := auditParse(text)
		if !ok { // step 1
			if s := states[current]; s != nil {
				fail(current, s.expectedSeq, "undecodable")
			} else {
				fail("", 0, "undecodable")
			}
			break
		}
		s := states[l.Chain]
		switch { // step 2 and 3
		case s == nil:
			genesis := blake3.Sum256(append([]byte("ledger/genesis/v1\x00"), auditLP([]byte(l.Chain))...))
			s = &chainState{expectedSeq: 1, expectedPrev: genesis[:]}
			states[l.Chain] = s
		case l.Chain != current:
			fail(l.Chain, seq, "seq_gap")
		}
		current = l.Chain
		checkLink := true
		switch { // step 4.1
		case seq > s.expectedSeq:
			fail(l.Chain, s.expectedSeq, "seq_gap")
			checkLink = false
		case seq < s.expectedSeq:
			fail(l.Chain, seq, "seq_gap")
			continue
		}
		pre := []byte("ledger/entry/v1\x00") // step 4.2
		pre = binary.BigEndian.AppendUint64(pre, seq)
		pre = append(pre, prev...)
		pre = binary.BigEndian.AppendUint64(pre, uint64(timeUnixNano))
		for _, field := range [][]byte{[]byte(l.Chain), []byte(l.IdempotencyKey), []byte(l.Type), payload} {
			pre = append(pre, auditLP(field)...)
		}
		if sum := blake3.Sum256(pre); string(sum[:]) != string(hash) {
			fail(l.Chain, seq, "hash_mismatch")
		}
		if checkLink && string(prev) != string(s.expectedPrev) { // step 4.3
			fail(l.Chain, seq, "broken_link")
		}
		s.expectedSeq, s.expectedPrev = seq+1, hash // step 4.4
		if held[l.Chain] == nil {
			held[l.Chain] = map[uint64]string{}
		}
		held[l.Chain][seq] = hex.EncodeToString(hash)
	}
	for _, h := range heads { // step 5
		if h.Seq == 0 {
			genesis := blake3.Sum256(append([]byte("ledger/genesis/v1\x00"), auditLP([]byte(h.Chain))...))
			if hex.EncodeToString(genesis[:]) != h.Hash {
				fail(h.Chain, 0, "head_mismatch")
			}
			continue
		}
		if held[h.Chain][h.Seq] != h.Hash {
			fail(h.Chain, h.Seq, "head_mismatch")
		}
	}
	return failures
}

// reasonOf names a reason for comparison with the engine's failures.
func reasonOf(s string) chain.Reason { return chain.Reason(s) }

// sortedFailures orders failures by chain, seq and reason, the order in
// which two verifiers can be compared.
func sortedFailures(failures []failureKey) []failureKey {
	failures = slices.Clone(failures)
	slices.SortFunc(failures, func(a, b failureKey) int {
		if c := strings.Compare(a.Chain, b.Chain); c != 0 {
			return c
		}
		if a.Seq != b.Seq {
			if a.Seq < b.Seq {
				return -1
			}
			return 1
		}
		return strings.Compare(string(a.Reason), string(b.Reason))
	})
	return failures
}

// The recipe of docs/FORMAT.md, implemented on its own, finds exactly the
// failures each export vector lists.
func TestAuditRecipeReproducesTheExportVectors(t *testing.T) {
	paths, err := filepath.Glob(filepath.Join(moduleRoot, vectors.VectorsDir, "export", "*.json"))
	if err != nil || len(paths) == 0 {
		t.Fatalf("%d export vectors, %v", len(paths), err)
	}
	for _, p := range paths {
		var c vectors.ExportCase
		readVectors(t, filepath.Join("export", filepath.Base(p)), &c)
		want := []failureKey{}
		for _, f := range c.ExpectedFailures {
			want = append(want, failureKey{f.Chain, f.Seq, reasonOf(f.Reason)})
		}
		got := auditVerify(c.Lines, c.ExpectHeads)
		if got == nil {
			got = []failureKey{}
		}
		if !slices.Equal(sortedFailures(got), sortedFailures(want)) {
			t.Errorf("%s: the recipe finds %v, the vector lists %v", c.Name, got, want)
		}
	}
}
