package bolt_test

import (
	"fmt"
	"testing"

	"pgregory.net/rapid"
)

// TestProbeRapid drives a backend through random commits of keys (small
// and large transactions, new chains, repeated keys on other chains),
// checkpoints, reopens, crashes and rolled-back transactions, against a
// plain model of the acknowledged keys: the probe must never rule one
// out. It also counts the new keys the probe could not rule out, which
// must stay near the filter's false positive rate.
func TestProbeRapid(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		m := newKeyedMachine(t, rt)
		asked, unsure := 0, 0
		actions := m.actions()
		actions[""] = func(rt *rapid.T) {
			for _, k := range m.order {
				if !m.b.MayHoldKey(k[0], k[1]) {
					rt.Fatalf("MayHoldKey(%q, %q) = false for an acknowledged key", k[0], k[1])
				}
			}
			for i := range 20 {
				asked++
				if m.b.MayHoldKey(fmt.Sprintf("rapid/%d", i%8), fmt.Sprintf("new-%d-%d", m.next, i)) {
					unsure++
				}
			}
		}
		rt.Repeat(actions)
		if asked >= 1000 && unsure > asked/10 {
			rt.Fatalf("the probe was unsure of %d of %d new keys", unsure, asked)
		}
	})
}
