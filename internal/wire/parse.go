package wire

import (
	"fmt"
	"strings"

	"github.com/ledgerworks/ledger/decimal"
)

// Rate parses a unit cost or rate at the places it is written with (at
// most decimal.ScaleMax); nil for "". Its errors match the decimal
// package's, which both callers classify as input errors.
func Rate(what, text string) (*decimal.Decimal, error) {
	if text == "" {
		return nil, nil
	}
	scale := 0
	if i := strings.IndexByte(text, '.'); i >= 0 {
		scale = len(text) - i - 1
	}
	if scale > decimal.ScaleMax {
		return nil, fmt.Errorf("%s %q has more than %d decimal places: %w", what, text, decimal.ScaleMax, decimal.ErrScaleRange)
	}
	d, err := decimal.Parse(text, uint8(scale))
	if err != nil {
		return nil, fmt.Errorf("%s %q at %d decimal places: %w", what, text, scale, err)
	}
	return &d, nil
}
