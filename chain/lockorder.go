package chain

import (
	"context"
	"slices"

	"github.com/ledgerworks/ledger/storage"
)

// On a store whose chain heads are row locks shared with other processes
// (storage.HeadLocker: PostgreSQL), two group commits that lock the same
// heads in different orders could each wait for the other. The group
// committer therefore locks, before it runs any request, every head it
// knows the group will write, in one statement and in ascending order of
// the names: the chains of the group's appends, the chains its Update
// requests planned (WithPlannedAppends), and the chains an earlier attempt
// of the same group locked. Waits in one global order cannot form a
// cycle. A function that then locks a head nobody planned, below one the
// transaction holds, waits for it a bounded time only; when that ends in
// storage.ErrRetry the group runs again with the chains it learned locked
// first, and as long as each attempt learns a chain the attempt is not
// counted against commitRetriesMax. A request still in conflict when the
// retries are spent is set aside, the rest of its group commits, and it
// runs alone afterwards, its learned heads locked first: a conflict never
// fails the requests beside it.

// PlannedAppendsMax bounds the appends WithPlannedAppends keeps; the rest
// are not planned (and are locked when the function makes them).
const PlannedAppendsMax = 64

// lockOrderRetriesMax bounds the attempts of one group that learned a
// chain: each one adds at least one chain to what the group locks first.
const lockOrderRetriesMax = 16

type plannedAppendsKey struct{}

// WithPlannedAppends returns ctx carrying the appends that an Update run
// with it is going to make (their chains and idempotency keys; the other
// fields are not used). On a store shared with other processes the group
// committer locks their chains' heads with the rest of the group's, in one
// global order, and looks their keys up in the same round trip, before it
// runs the function. It is a hint: the function may append elsewhere or
// not at all, and on an embedded store it changes nothing. The first
// PlannedAppendsMax requests are kept.
func WithPlannedAppends(ctx context.Context, reqs ...Request) context.Context {
	reqs = reqs[:min(len(reqs), PlannedAppendsMax)]
	pc := &plannedContext{Context: ctx}
	pc.keys = pc.one[:0]
	if len(reqs) > len(pc.one) {
		pc.keys = make([]storage.ChainKey, 0, len(reqs))
	}
	for _, r := range reqs {
		pc.keys = append(pc.keys, storage.ChainKey{Chain: r.Chain, Key: r.IdempotencyKey})
	}
	return pc
}

// plannedContext is a context carrying planned appends: the context holds
// them, and one append in place, so that planning a single append costs
// one allocation.
type plannedContext struct {
	context.Context
	keys []storage.ChainKey
	one  [1]storage.ChainKey
}

func (pc *plannedContext) Value(key any) any {
	if key == (plannedAppendsKey{}) {
		return pc
	}
	return pc.Context.Value(key)
}

// plannedAppends returns the appends ctx carries.
func plannedAppends(ctx context.Context) []storage.ChainKey {
	if ctx == nil {
		return nil
	}
	if pc, ok := ctx.Value(plannedAppendsKey{}).(*plannedContext); ok {
		return pc.keys
	}
	return nil
}

// prepareGroup looks the keys of the group's Append requests up together
// (storage.KeyPreparer), in the order the group runs them, when there are
// at least two. On a storage.HeadLocker it also locks, in the same round
// trip and one global order, the heads of every chain the group is known
// to write: its appends' (keyed or not), its Update requests' planned
// appends', and learned, the chains an earlier attempt locked. keys is
// scratch, returned for the next run.
func prepareGroup(stx storage.Tx, pending []*request, learned []string, keys []storage.ChainKey) []storage.ChainKey {
	preparer, ok := stx.(storage.KeyPreparer)
	if !ok {
		return keys
	}
	_, locker := stx.(storage.HeadLocker)
	keys = keys[:0]
	heads := false // keys holds chains to lock beyond the appends' keys
	for _, r := range pending {
		switch {
		case r.fn == nil && r.appendReq.IdempotencyKey != "":
			keys = appendChainKey(keys, r.appendReq)
		case r.fn == nil && locker:
			keys, heads = append(keys, storage.ChainKey{Chain: r.appendReq.Chain}), true
		case locker:
			if planned := plannedAppends(r.ctx); len(planned) > 0 {
				keys, heads = append(keys, planned...), true
			}
		}
	}
	if locker && len(learned) > 0 {
		for _, c := range learned {
			keys = append(keys, storage.ChainKey{Chain: c})
		}
		heads = true
	}
	if len(keys) > 1 || heads && len(keys) > 0 {
		preparer.PrepareKeys(context.Background(), keys)
	}
	clear(keys) // the scratch outlives the group: keep none of its strings
	return keys
}

// learnHeads adds to learned the chains whose heads stx holds or failed to
// lock, and reports whether it added any.
func learnHeads(stx storage.Tx, learned *[]string) bool {
	locker, ok := stx.(storage.HeadLocker)
	if !ok {
		return false
	}
	n := len(*learned)
	all := locker.LockedHeads(slices.Clone(*learned))
	slices.Sort(all)
	*learned = slices.Compact(all)
	return len(*learned) > n
}
