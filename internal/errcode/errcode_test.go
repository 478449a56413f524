package errcode_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/ledgerworks/ledger/chain"
	"github.com/ledgerworks/ledger/decimal"
	"github.com/ledgerworks/ledger/internal/errcode"
	"github.com/ledgerworks/ledger/valuations"
)

// Each class of error has its code, the most specific class first, with
// the caller's own classes at their places in the order.
func TestOf(t *testing.T) {
	missing, input, verification := errors.New("missing"), errors.New("input"), errors.New("verification")
	local := errcode.Local{Verification: verification, Input: input, Missing: missing,
		Usage: func(err error) bool { return err.Error() == "usage" }}
	for _, c := range []struct {
		err  error
		want string
	}{
		{chain.ErrInvalid, errcode.InvalidInput},
		{fmt.Errorf("wrapped: %w", decimal.ErrOverflow), errcode.InvalidInput},
		{chain.ErrIdempotencyConflict, errcode.Conflict},
		{chain.ErrNotFound, errcode.NotFound},
		{chain.ErrLocked, errcode.Locked},
		{chain.ErrCorrupt, errcode.Corrupt},
		{chain.ErrTreeBehind, errcode.TreeBehind},
		{context.Canceled, errcode.Canceled},
		{fmt.Errorf("%w: %w", valuations.ErrIncomplete, chain.ErrInvalid), errcode.Incomplete},
		{errors.New("disk full"), errcode.Storage},
		{input, errcode.InvalidInput},
		{fmt.Errorf("%w: %w", missing, chain.ErrNotFound), errcode.Storage},
		{fmt.Errorf("%w: %w", verification, chain.ErrInvalid), errcode.Verification},
		{errors.New("usage"), errcode.Usage},
	} {
		if got := errcode.Of(c.err, local); got != c.want {
			t.Errorf("%v: %s, want %s", c.err, got, c.want)
		}
	}
	if got := errcode.Of(input, errcode.Local{}); got != errcode.Storage {
		t.Errorf("without the caller's classes an unknown error is %s", got)
	}
}
