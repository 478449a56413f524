package bolt

import (
	"fmt"
	"runtime/debug"
	"sync"
	"sync/atomic"

	bbolt "go.etcd.io/bbolt"

	"github.com/ledgerworks/ledger/storage"
)

// ChainIDsMax bounds how many chain names a handle keeps the ids of in
// memory (measured: 170 bytes each for names of 29 bytes, 11 MiB at the
// bound). Below it the map holds every chain of the file, so a name it
// lacks is a chain the file does not have; past it, the probe cannot rule
// out the keys of a chain it lacks, and a read looks the chain up in the
// file as before.
const ChainIDsMax = 1 << 16

// chainIDs maps the names of chains committed to the file to their ids. An
// id never changes once committed (chains are never deleted, and an id is
// never handed out twice), so an entry read from any snapshot holds for
// every later one, and a read transaction may use it instead of the chains
// bucket. It is filled only from committed state: the file at Open, read
// transactions, and commits that created chains, once they succeeded.
type chainIDs struct {
	ids   sync.Map // string -> uint64; reads take no lock
	count atomic.Int64
	// complete is set when ids holds every chain of the file: loaded at
	// Open with at most ChainIDsMax chains, and every chain created since
	// added. Once cleared it stays cleared for the life of the handle.
	complete atomic.Bool
}

func (c *chainIDs) get(name string) (uint64, bool) {
	v, ok := c.ids.Load(name)
	if !ok {
		return 0, false
	}
	return v.(uint64), true
}

// add records a committed chain. A full map takes no more names and is no
// longer complete.
func (c *chainIDs) add(name string, id uint64) {
	if _, ok := c.ids.Load(name); ok {
		return
	}
	if c.count.Load() >= ChainIDsMax {
		c.complete.Store(false)
		return
	}
	if _, loaded := c.ids.LoadOrStore(name, id); !loaded {
		c.count.Add(1)
	}
}

// newChain is a chain a write transaction created, with its id.
type newChain struct {
	name string
	id   uint64
}

var _ storage.KeyProber = (*Backend)(nil)

// MayHoldKey implements storage.KeyProber without a transaction, from the
// file's key filter under the chain's id and, with the log, the memory
// tables. It says false only when the filter is current (it holds the keys
// of every commit whose bbolt transaction has returned: see keyFilter) and
// rules the key out, or the complete map of chain ids shows that the file
// has no such chain, and no memory table holds the key. A read-only handle
// has no filter and always says true.
//
// The file is asked first, so that a key it holds (a retry, the case where
// the answer is true) costs one filter probe and no table lookups. A key
// the file does not show may be in a table, or may have left one for the
// file since: a checkpoint updates the filter and the ids before its commit
// returns, before it drops the table. So after the tables the file is
// asked again; a table dropped before the tables were read shows there.
func (b *Backend) MayHoldKey(chain, key string) bool {
	digest := KeyDigest(key)
	if b.fileMayHold(chain, &digest) {
		return true
	}
	if !b.overlay {
		return false
	}
	v := b.published.Load()
	for _, m := range v.tables {
		if _, ok := m.LookupKey(chain, key, v.asOf); ok {
			return true
		}
	}
	return b.fileMayHold(chain, &digest)
}

// fileMayHold reports whether the file's committed index may hold the key.
func (b *Backend) fileMayHold(chain string, digest *[KeyDigestSize]byte) bool {
	id, ok := b.cache.chains.get(chain)
	return b.fileMayHoldID(id, ok, digest)
}

// prepareProbe loads what MayHoldKey needs of a file opened for writing:
// the ids of its chains and the key filter, built from the index as of the
// file's last commit. The first write transaction would build the filter
// anyway; built here, it rules new keys out from the first append of a
// reopened ledger instead of after the first checkpoint. Reading the index
// costs about 32 bytes of file per key, a small part of what a writable
// Open already reads (walkFile reads every page). A failure leaves the
// probe saying true, and the file's damage to the calls that read it.
func (b *Backend) prepareProbe(readOnly bool) {
	if readOnly {
		return
	}
	defer func(fault bool) {
		debug.SetPanicOnFault(fault)
		_ = recover() // a damaged page: the probe stays unsure
	}(debug.SetPanicOnFault(true))
	_ = b.db.View(func(btx *bbolt.Tx) error {
		t := &tx{tx: btx, path: b.path, cache: b.cache}
		if err := b.loadChainIDs(t); err != nil {
			return err
		}
		if b.cache.filter.Load() != nil {
			return nil
		}
		f, err := t.buildKeyFilter(t.snapshotTxid())
		if err != nil {
			return err
		}
		b.cache.mu.Lock()
		defer b.cache.mu.Unlock()
		if b.cache.filter.Load() == nil {
			b.cache.filter.Store(f)
		}
		return nil
	})
}

// loadChainIDs reads up to ChainIDsMax chains of the file into the map,
// which is complete when the file has no more.
func (b *Backend) loadChainIDs(t *tx) error {
	cur := t.chains().Cursor()
	var n int64
	for k, v := cur.First(); k != nil; k, v = cur.Next() {
		if n == ChainIDsMax {
			b.cache.chains.count.Store(n)
			return nil
		}
		c, err := decodeChain(v)
		if err != nil {
			return fmt.Errorf("chain %q: %w", k, err)
		}
		b.cache.chains.ids.Store(string(k), c.id)
		n++
	}
	b.cache.chains.count.Store(n)
	b.cache.chains.complete.Store(true)
	return nil
}
