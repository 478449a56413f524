package financial

import (
	"fmt"
	"time"
)

// Date is a calendar day, the effective date of a posting, counted in days
// since 1970-01-01 (negative before). It has no time of day and no zone.
type Date int32

// The date range. It spans dateDays days so that a day's position in the
// range fits the balance index (see balance.go); 2^17 days are more than
// 358 years.
const (
	dateDays            = 1 << 17
	DateMin        Date = -25567 // 1900-01-01
	DateMax             = DateMin + dateDays - 1
	secondsDay          = 24 * 60 * 60
	dateLayout          = "2006-01-02"
	dateTextLength      = len(dateLayout)
)

// ParseDate parses a date written YYYY-MM-DD, exactly: no time, no zone,
// no missing zeros, within DateMin..DateMax.
func ParseDate(text string) (Date, error) {
	if len(text) != dateTextLength {
		return 0, invalid(ErrInvalidDate, "%q is not YYYY-MM-DD", text)
	}
	t, err := time.Parse(dateLayout, text)
	if err != nil || t.Format(dateLayout) != text {
		return 0, invalid(ErrInvalidDate, "%q is not a calendar date YYYY-MM-DD", text)
	}
	d := DateOf(t)
	if err := d.Validate(); err != nil {
		return 0, err
	}
	return d, nil
}

// MustParseDate is ParseDate for constants and tests; it panics on error.
func MustParseDate(text string) Date {
	d, err := ParseDate(text)
	if err != nil {
		panic(err)
	}
	return d
}

// DateOf returns the calendar day of t in t's own location.
func DateOf(t time.Time) Date {
	y, m, d := t.Date()
	return Date(time.Date(y, m, d, 0, 0, 0, 0, time.UTC).Unix() / secondsDay)
}

// Validate reports a date outside DateMin..DateMax.
func (d Date) Validate() error {
	if d < DateMin || d > DateMax {
		return invalid(ErrInvalidDate, "day %d outside %s..%s", int32(d), DateMin, DateMax)
	}
	return nil
}

// Time returns midnight UTC of the day.
func (d Date) Time() time.Time { return time.Unix(int64(d)*secondsDay, 0).UTC() }

// String returns YYYY-MM-DD.
func (d Date) String() string { return d.Time().Format(dateLayout) }

// MarshalText writes YYYY-MM-DD (so JSON shows dates as strings).
func (d Date) MarshalText() ([]byte, error) { return []byte(d.String()), nil }

// UnmarshalText parses YYYY-MM-DD with ParseDate's rules.
func (d *Date) UnmarshalText(text []byte) error {
	parsed, err := ParseDate(string(text))
	if err != nil {
		return err
	}
	*d = parsed
	return nil
}

// index is the day's position in the date range, 0..dateDays-1.
func (d Date) index() uint32 { return uint32(int32(d) - int32(DateMin)) }

// GoString shows the date in test failures.
func (d Date) GoString() string { return fmt.Sprintf("financial.MustParseDate(%q)", d.String()) }
