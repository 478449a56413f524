package outbox

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/ledgerworks/ledger/chain"
)

// Limits of Activity.
const (
	// ActivityBucketsMax bounds the buckets of one Activity call.
	ActivityBucketsMax = 1440
	// ActivityEntriesMax bounds the deliveries entries one Activity call
	// reads; past it the answer is Truncated.
	ActivityEntriesMax = 200_000
)

// Bucket counts the attempt outcomes recorded in one interval.
type Bucket struct {
	Start                       time.Time
	Delivered, Failed, Rejected int64
}

// ActivityReport is what Activity counted.
type ActivityReport struct {
	Buckets []Bucket
	// Truncated: ActivityEntriesMax entries were read before the end of
	// the window; the later buckets are undercounted.
	Truncated bool
}

// Activity counts the outcomes of a topic's delivery attempts recorded
// from since on, in n buckets of width each (the last bucket also counts
// what came after its end). It finds the window's first entry by a binary
// search over the entries' times (which a chain's entries keep in order)
// and reads the deliveries chain from there, so a window costs its own
// entries, not the chain's history.
func Activity(ctx context.Context, db *chain.DB, tenant, topic string, since time.Time, width time.Duration, n int) (ActivityReport, error) {
	if n < 1 || n > ActivityBucketsMax || width <= 0 {
		return ActivityReport{}, fmt.Errorf("outbox: activity of %d buckets of %s: want 1 to %d buckets of a positive width: %w",
			n, width, ActivityBucketsMax, chain.ErrInvalid)
	}
	deliveries, err := DeliveriesChain(tenant, topic)
	if err != nil {
		return ActivityReport{}, err
	}
	out := ActivityReport{Buckets: make([]Bucket, n)}
	for i := range out.Buckets {
		out.Buckets[i].Start = since.Add(time.Duration(i) * width)
	}
	head, err := db.Head(ctx, deliveries)
	if errors.Is(err, chain.ErrNotFound) {
		return out, nil
	}
	if err != nil {
		return ActivityReport{}, err
	}
	first, err := firstAtOrAfter(ctx, db, deliveries, head.Seq, since.UnixNano())
	if err != nil || first > head.Seq {
		return out, err
	}
	read := 0
	for e, err := range db.Entries(ctx, deliveries, first) {
		if err != nil {
			return ActivityReport{}, err
		}
		if read++; read > ActivityEntriesMax {
			out.Truncated = true
			break
		}
		if e.Type != TypeOutcome || e.TimeUnixNano < since.UnixNano() {
			continue
		}
		o, err := decodeOutcome(e.Payload)
		if err != nil {
			return ActivityReport{}, err
		}
		i := min(int((e.TimeUnixNano-since.UnixNano())/int64(width)), n-1)
		for _, it := range o.Items {
			switch it.Kind {
			case Delivered:
				out.Buckets[i].Delivered++
			case Failed:
				out.Buckets[i].Failed++
			case Rejected:
				out.Buckets[i].Rejected++
			}
		}
	}
	return out, nil
}

// firstAtOrAfter is the smallest seq in [1, last] whose entry's time is at
// or after t, or last+1 when there is none.
func firstAtOrAfter(ctx context.Context, db *chain.DB, name string, last uint64, t int64) (uint64, error) {
	lo, hi := uint64(1), last+1
	for lo < hi {
		mid := lo + (hi-lo)/2
		e, err := db.Get(ctx, name, mid)
		if err != nil {
			return 0, err
		}
		if e.TimeUnixNano < t {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	return lo, nil
}
