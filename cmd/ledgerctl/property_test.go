package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"pgregory.net/rapid"
)

// modelEntry is what the model remembers of an appended entry.
type modelEntry struct {
	key, typ, payload string
	hash              string
}

// cliModel is the plain model the command line is checked against: chains
// as lists of entries, keys as an index into them.
type cliModel struct {
	chains map[string][]modelEntry
}

// TestCommandsAgainstAModel runs random sequences of append, get, head, log
// and verify through the command line and checks each exit code and output
// against the model; at the end an export, imported into a fresh ledger,
// must export identically.
func TestCommandsAgainstAModel(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(rt *rapid.T) {
		dir, err := os.MkdirTemp(memoryTempDir(), "ledgerctl-rapid-")
		if err != nil {
			rt.Fatal(err)
		}
		defer os.RemoveAll(dir)
		next := clockStart
		run := func(args ...string) cliResult {
			a := &app{
				clock:       func() time.Time { now := next; next = next.Add(time.Second); return now },
				environment: func(string) string { return "" },
			}
			var stdout, stderr bytes.Buffer
			code := execute(context.Background(), a, append([]string{"--db", filepath.Join(dir, "ledger.db"), "-o", "json"}, args...),
				strings.NewReader(""), &stdout, &stderr)
			return cliResult{stdout: stdout.String(), stderr: stderr.String(), code: code}
		}
		if r := run("init"); r.code != 0 {
			rt.Fatalf("init: %+v", r)
		}
		m := cliModel{chains: map[string][]modelEntry{}}
		chainNames := rapid.SampledFrom([]string{"acme/a", "acme/b", "globex/a"})
		keys := rapid.SampledFrom([]string{"", "", "k1", "k2", "k3"})
		payloads := rapid.SampledFrom([]string{"p", "q", "", `{"x":1}`})
		types := rapid.SampledFrom([]string{"t/v1", "t/v2"})

		rt.Repeat(map[string]func(*rapid.T){
			"append": func(rt *rapid.T) {
				c, key, typ, payload := chainNames.Draw(rt, "chain"), keys.Draw(rt, "key"), types.Draw(rt, "type"), payloads.Draw(rt, "payload")
				r := run("append", c, "--type", typ, "--key", key, "--data", payload)
				var existing *modelEntry
				var existingSeq int
				for i, e := range m.chains[c] {
					if key != "" && e.key == key {
						existing, existingSeq = &m.chains[c][i], i+1
					}
				}
				switch {
				case existing != nil && (existing.typ != typ || existing.payload != payload):
					if r.code != exitConflict || !strings.Contains(r.stderr, fmt.Sprintf(`"existing_seq":%d`, existingSeq)) {
						rt.Fatalf("conflict expected: %+v", r)
					}
				case existing != nil:
					got := decodeAppended(rt, r)
					if !got.Replayed || got.Seq != uint64(existingSeq) || got.Hash != existing.hash {
						rt.Fatalf("replay of seq %d expected: %+v", existingSeq, got)
					}
				default:
					got := decodeAppended(rt, r)
					want := uint64(len(m.chains[c]) + 1)
					prev := ""
					if want > 1 {
						prev = m.chains[c][want-2].hash
					}
					if got.Replayed || got.Seq != want || (prev != "" && got.PrevHash != prev) {
						rt.Fatalf("append of seq %d expected: %+v", want, got)
					}
					m.chains[c] = append(m.chains[c], modelEntry{key: key, typ: typ, payload: payload, hash: got.Hash})
				}
			},
			"get": func(rt *rapid.T) {
				c := chainNames.Draw(rt, "chain")
				seq := rapid.IntRange(1, len(m.chains[c])+1).Draw(rt, "seq")
				r := run("get", c, fmt.Sprint(seq))
				if seq > len(m.chains[c]) {
					if r.code != exitNotFound {
						rt.Fatalf("get past the end: %+v", r)
					}
					return
				}
				var e entryJSON
				if r.code != 0 || json.Unmarshal([]byte(r.stdout), &e) != nil {
					rt.Fatalf("get: %+v", r)
				}
				want := m.chains[c][seq-1]
				payload, _ := base64.StdEncoding.DecodeString(e.Payload)
				if e.Hash != want.hash || e.IdempotencyKey != want.key || e.Type != want.typ || string(payload) != want.payload {
					rt.Fatalf("get %s %d = %+v, model %+v", c, seq, e, want)
				}
			},
			"head": func(rt *rapid.T) {
				c := chainNames.Draw(rt, "chain")
				r := run("head", c)
				if len(m.chains[c]) == 0 {
					if r.code != exitNotFound {
						rt.Fatalf("head of an empty chain: %+v", r)
					}
					return
				}
				last := m.chains[c][len(m.chains[c])-1]
				want := fmt.Sprintf(`{"chain":%q,"seq":%d,"hash":%q}`+"\n", c, len(m.chains[c]), last.hash)
				if r.code != 0 || r.stdout != want {
					rt.Fatalf("head %+v, want %s", r, want)
				}
			},
			"log": func(rt *rapid.T) {
				c := chainNames.Draw(rt, "chain")
				if len(m.chains[c]) == 0 {
					return
				}
				limit := rapid.IntRange(1, 3).Draw(rt, "limit")
				var page logJSON
				r := run("log", c, "--limit", fmt.Sprint(limit))
				if r.code != 0 || json.Unmarshal([]byte(r.stdout), &page) != nil {
					rt.Fatalf("log: %+v", r)
				}
				n := min(limit, len(m.chains[c]))
				if len(page.Entries) != n || (n < len(m.chains[c])) != (page.NextSeq == uint64(n+1)) {
					rt.Fatalf("log page %+v of a %d-entry chain, limit %d", page, len(m.chains[c]), limit)
				}
			},
			"verify": func(rt *rapid.T) {
				entries := 0
				for _, es := range m.chains {
					entries += len(es)
				}
				r := run("verify")
				want := fmt.Sprintf(`{"ok":true,"chains":"%d","entries":"%d","failures":[],"truncated":false}`+"\n", nonEmpty(m), entries)
				if r.code != 0 || r.stdout != want {
					rt.Fatalf("verify %+v, want %s", r, want)
				}
			},
		})

		// The whole ledger survives an export and an import unchanged.
		export := filepath.Join(dir, "export.jsonl")
		if r := run("export", "--all", "--out", export); r.code != 0 {
			rt.Fatalf("export: %+v", r)
		}
		original := run("export", "--all").stdout
		if nonEmpty(m) == 0 {
			// An export without entries is refused, and creates no copy.
			if r := run("--db", filepath.Join(dir, "copy.db"), "import", "--file", export); r.code != exitUsage {
				rt.Fatalf("import of an empty export: %+v", r)
			}
			if _, err := os.Stat(filepath.Join(dir, "copy.db")); !os.IsNotExist(err) {
				rt.Fatalf("an empty import created the copy: %v", err)
			}
			return
		}
		if r := run("--db", filepath.Join(dir, "copy.db"), "import", "--file", export); r.code != 0 {
			rt.Fatalf("import: %+v", r)
		}
		if copied := run("--db", filepath.Join(dir, "copy.db"), "export", "--all").stdout; copied != original {
			rt.Fatalf("the imported copy exports differently")
		}
	})
}

func decodeAppended(rt *rapid.T, r cliResult) appendedJSON {
	var got appendedJSON
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &got) != nil {
		rt.Fatalf("append: %+v", r)
	}
	return got
}

func nonEmpty(m cliModel) int {
	n := 0
	for _, es := range m.chains {
		if len(es) > 0 {
			n++
		}
	}
	return n
}

// memoryTempDir is a folder in memory when the system has one (the
// property test opens and commits thousands of times; its fsyncs on disk
// would make it slow), else the default temporary folder.
func memoryTempDir() string {
	if info, err := os.Stat("/dev/shm"); err == nil && info.IsDir() {
		if f, err := os.CreateTemp("/dev/shm", "ledgerctl-probe-"); err == nil {
			f.Close()
			os.Remove(f.Name())
			return "/dev/shm"
		}
	}
	return ""
}
