package chain

import (
	"slices"

	"github.com/ledgerworks/ledger/storage"
)

// Late joiners. On a store whose heads other processes lock too
// (storage.HeadLocker: PostgreSQL), a group's first round trip may wait
// for another process's group to commit on the same chains. The requests
// that queue meanwhile would make this process's next group, which then
// waits its own turn on the same heads: with several processes writing the
// same chains, each group carries a fraction of the requests and the work
// done once a group (its statements, its commit) is spread over few. A
// request that writes only chains whose heads the group already holds
// joins the group instead, before its commit: it waits for no lock, and
// its keys are looked up in at most one more round trip (none when the
// chains' key filters, caught up under the locks, rule them out). The
// other queued requests keep their turn: they open the next group.

// joinRoundsMax bounds the rounds of late joiners a group takes, each at
// most one round trip with the heads held.
const joinRoundsMax = 2

// takeJoiners takes from the queue, without waiting, the requests that
// write only chains stx holds, up to room, and marks them running; the
// requests it takes that do not qualify go to p.carry, which opens the
// next group.
func (db *DB) takeJoiners(stx storage.Tx, p *pipeline, room int) []*request {
	locker, ok := stx.(storage.HeadLocker)
	if !ok || room <= 0 || len(db.queue) == 0 {
		return nil
	}
	p.held = locker.LockedHeads(p.held[:0])
	slices.Sort(p.held)
	var joiners []*request
	for len(joiners) < room && len(p.carry) < db.opts.BatchSizeMax {
		var r *request
		select {
		case r = <-db.queue:
		default:
			return joiners
		}
		if !writesHeld(r, p.held) || !r.state.CompareAndSwap(requestQueued, requestRunning) {
			p.carry = append(p.carry, r) // a canceled one is dropped by runGroup
			continue
		}
		joiners = append(joiners, r)
	}
	return joiners
}

// writesHeld reports whether every chain r is known to write is in held
// (sorted): an Append's chain, an Update's planned appends. An Update
// that planned nothing may write any chain, and never joins.
func writesHeld(r *request, held []string) bool {
	isHeld := func(chain string) bool {
		_, found := slices.BinarySearch(held, chain)
		return found
	}
	if r.fn == nil {
		return isHeld(r.appendReq.Chain)
	}
	planned := plannedAppends(r.ctx)
	if len(planned) == 0 {
		return false
	}
	for _, k := range planned {
		if !isHeld(k.Chain) {
			return false
		}
	}
	return true
}
