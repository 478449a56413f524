package postgres

import "context"

// FilterSeq reports how far the backend's key filter of chain reaches.
func FilterSeq(b *Backend, chain string) (seq uint64, ok bool) {
	f := b.filters.get(chain)
	if f == nil {
		return 0, false
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.seq, true
}

// SingleSchema exposes singleSchema.
var SingleSchema = singleSchema

// RoundTrips reports the statement batches the backend's transactions sent
// and the statements of its ReadKey and ReadKeys calls.
func RoundTrips(b *Backend) int64 { return b.roundTrips.Load() }

// CatchUpRows runs the catch-up statement for one chain past after, as
// the lock round trip of a transaction locking chains chains does, and
// counts the entries that came back with their data and without.
func CatchUpRows(ctx context.Context, b *Backend, chain string, after uint64, chains int) (withData, keysOnly int, err error) {
	rows, err := b.pool.Query(ctx, sqlCatchUp, []string{chain}, []int64{int64(after)}, int64(KeyFilterCatchUpMax), catchUpBytes(chains))
	if err != nil {
		return 0, 0, err
	}
	var caught []caughtEntry
	if err := scanCaught(rows, 1, &caught); err != nil {
		return 0, 0, err
	}
	for _, e := range caught {
		if e.data == nil {
			keysOnly++
		} else {
			withData++
		}
	}
	return withData, keysOnly, nil
}
