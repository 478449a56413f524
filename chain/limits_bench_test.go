package chain_test

import (
	"testing"

	"github.com/ledgerworks/ledger/chain"
)

// BenchmarkValidateRequest measures the check every append runs, with the
// rules for new names (ValidateRequest) beside the limits alone
// (ValidateStoredRequest) as the baseline, for a typical ASCII request and
// one with multi-byte names.
func BenchmarkValidateRequest(b *testing.B) {
	for _, c := range []struct {
		name string
		req  chain.Request
	}{
		{"ascii", chain.Request{Chain: "acme/stock/SKU-1/WH-1", IdempotencyKey: "po-4711/line-1:qty", Type: "stock.movement/v1", Payload: []byte("{}")}},
		{"multibyte", chain.Request{Chain: "ünï/stock/日本😀/WH-1", IdempotencyKey: "ключ-4711", Type: "stock.movement/v1", Payload: []byte("{}")}},
	} {
		for _, v := range []struct {
			name     string
			validate func(chain.Request, int) error
		}{{"new", chain.ValidateRequest}, {"stored-baseline", chain.ValidateStoredRequest}} {
			b.Run(c.name+"/"+v.name, func(b *testing.B) {
				for b.Loop() {
					if err := v.validate(c.req, 0); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
