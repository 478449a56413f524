package server_test

import (
	"bytes"
	"fmt"
	"net/http"
	"testing"

	"pgregory.net/rapid"

	"github.com/ledgerworks/ledger/api"
	"github.com/ledgerworks/ledger/server"
)

// The replay contract over HTTP against a plain model: per (key, chain) the
// first request's answer is kept; a retry with its body gets those bytes
// back marked replayed, another body is KEY_REUSED, and a chain holds one
// entry per distinct key that appended to it.
func TestReplayContractProperty(t *testing.T) {
	db := openBolt(t)
	ts := startServer(t, db, server.Options{IdempotencyCacheSize: 8}) // a small cache: replays from the store too
	checks := 0
	rapid.Check(t, func(rt *rapid.T) {
		checks++
		token := ts.key(fmt.Sprintf("t%d", checks), writer...)
		type first struct {
			body []byte
			resp []byte
		}
		answered := map[string]first{} // chain + key → first request and answer
		entries := map[string]int{}    // chain → entries
		chains := []string{"a", "b/c"}
		rt.Repeat(map[string]func(*rapid.T){
			"append": func(rt *rapid.T) {
				c := rapid.SampledFrom(chains).Draw(rt, "chain")
				key := fmt.Sprintf("k%d", rapid.IntRange(0, 5).Draw(rt, "key"))
				body := api.AppendRequest{Type: "t", Payload: []byte{byte(rapid.IntRange(0, 2).Draw(rt, "payload"))}}
				enc := marshalJSON(rt, body)
				r := ts.do(http.MethodPost, "/v1/chains/"+c+"/entries", token, key, enc)
				prev, seen := answered[c+" "+key]
				switch {
				case !seen:
					if r.status != http.StatusCreated || r.header.Get(api.HeaderReplayed) != "" {
						rt.Fatalf("new key: %d %s", r.status, r.body)
					}
					answered[c+" "+key] = first{body: enc, resp: r.body}
					entries[c]++
				case bytes.Equal(prev.body, enc):
					if r.header.Get(api.HeaderReplayed) != "true" || !bytes.Equal(r.body, prev.resp) {
						rt.Fatalf("retry: %d %q %s, want %s", r.status, r.header.Get(api.HeaderReplayed), r.body, prev.resp)
					}
				default:
					if p := r.problem(t); r.status != http.StatusConflict || p.Code != api.CodeKeyReused {
						rt.Fatalf("another body: %d %s", r.status, r.body)
					}
				}
			},
			"head": func(rt *rapid.T) {
				c := rapid.SampledFrom(chains).Draw(rt, "chain")
				r := ts.do(http.MethodGet, "/v1/chains/"+c+"/head", token, "", nil)
				if entries[c] == 0 {
					if r.status != http.StatusNotFound {
						rt.Fatalf("head of an empty chain: %d", r.status)
					}
					return
				}
				var h api.Head
				r.decode(t, http.StatusOK, &h)
				if h.Seq != uint64(entries[c]) {
					rt.Fatalf("chain %s seq %d, model %d", c, h.Seq, entries[c])
				}
			},
		})
	})
}

func marshalJSON(rt *rapid.T, v any) []byte {
	b := marshalBody(v)
	if b == nil {
		rt.Fatalf("marshal %v", v)
	}
	return b
}
