package main

import (
	"strings"
	"testing"
)

func TestHeadPrintsWhatVerifyExpectHeadTakes(t *testing.T) {
	t.Parallel()
	for _, l := range testLedgers(t) {
		t.Run(l.backend, func(t *testing.T) {
			l.t = t
			l.seed()
			text := l.must("head", "acme/audit/events")
			golden(t, "head", text+l.must("-o", "json", "head", "acme/audit/events"))
			// The text form is exactly an --expect-head value.
			l.must("verify", "--expect-head", strings.TrimSpace(text))
			l.run("-o", "json", "head", "acme/nothing").expect(t, exitNotFound, `"code":"NOT_FOUND"`)
		})
	}
}
