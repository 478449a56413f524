package main

import (
	"encoding/json"
	"testing"
)

func TestChainsListsEveryHeadInOrder(t *testing.T) {
	t.Parallel()
	for _, l := range testLedgers(t) {
		t.Run(l.backend, func(t *testing.T) {
			l.t = t
			l.seed()
			text := l.must("chains")
			asJSON := l.must("-o", "json", "chains")
			golden(t, "chains", text+asJSON)
			var list struct {
				Chains []headJSON `json:"chains"`
			}
			if err := json.Unmarshal([]byte(asJSON), &list); err != nil {
				t.Fatal(err)
			}
			heads := list.Chains
			want := []struct {
				chain string
				seq   uint64
			}{{"acme/audit/events", 5}, {"acme/scanner/WH-1/dock-2", 2}, {"globex/audit/sign-ins", 1}}
			if len(heads) != len(want) {
				t.Fatalf("%d chains, want %d", len(heads), len(want))
			}
			for i, w := range want {
				if heads[i].Chain != w.chain || heads[i].Seq != w.seq {
					t.Fatalf("chain %d is %+v, want %+v", i, heads[i], w)
				}
			}
		})
	}
}

func TestChainsOfAnEmptyLedgerIsAnEmptyArray(t *testing.T) {
	t.Parallel()
	l := newFileLedger(t)
	l.must("init")
	if got := l.must("-o", "json", "chains"); got != `{"chains":[]}`+"\n" {
		t.Fatalf("got %q", got)
	}
}
