package financial

import (
	"errors"
	"testing"
	"time"

	"github.com/ledgerworks/ledger/chain"
)

func TestDateRange(t *testing.T) {
	if DateMin.String() != "1900-01-01" || DateMax.String() != "2258-11-11" || DateMax.index() != dateDays-1 {
		t.Fatalf("range %s..%s", DateMin, DateMax)
	}
	for _, text := range []string{"1900-01-01", "2258-11-11", "2024-02-29", "1970-01-01", "1969-12-31"} {
		d, err := ParseDate(text)
		if err != nil || d.String() != text || DateOf(d.Time()) != d {
			t.Errorf("%s: %v %v", text, d, err)
		}
	}
	for _, text := range []string{"1899-12-31", "2258-11-12", "2023-02-29", "2026-1-01", "2026-01-01T00:00", " 2026-01-01", ""} {
		if _, err := ParseDate(text); !errors.Is(err, ErrInvalidDate) || !errors.Is(err, chain.ErrInvalid) {
			t.Errorf("%q: %v", text, err)
		}
	}
	late := time.Date(2026, 3, 10, 23, 30, 0, 0, time.FixedZone("UTC-5", -5*3600))
	if DateOf(late).String() != "2026-03-10" {
		t.Errorf("DateOf takes the day in the time's own zone: %s", DateOf(late))
	}
}
