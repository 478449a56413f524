package postgres

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
