package bolt_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"testing"

	"pgregory.net/rapid"

	"github.com/ledgerworks/ledger/storage"
	"github.com/ledgerworks/ledger/storage/bolt"
)

// logModel is the plain model of a ledger: the committed entries of each
// chain (their data), the seq of each key, and the state.
type logModel struct {
	entries map[string][]string
	keys    map[string]map[string]uint64
	state   map[string]string
}

func newLogModel() *logModel {
	return &logModel{entries: map[string][]string{}, keys: map[string]map[string]uint64{}, state: map[string]string{}}
}

func (m *logModel) clone() *logModel {
	c := newLogModel()
	for ch, e := range m.entries {
		c.entries[ch] = slices.Clone(e)
	}
	for ch, ks := range m.keys {
		c.keys[ch] = map[string]uint64{}
		for k, v := range ks {
			c.keys[ch][k] = v
		}
	}
	for k, v := range m.state {
		c.state[k] = v
	}
	return c
}

// snapshot is what readSnapshot should read of the model.
func (m *logModel) snapshot() snapshot {
	s := snapshot{heads: map[string]uint64{}, entries: map[string][]string{}, keys: map[string]map[[storage.KeyDigestSize]byte]uint64{}}
	for ch, e := range m.entries {
		if len(e) == 0 {
			continue
		}
		s.heads[ch] = uint64(len(e))
		s.entries[ch] = e
		s.keys[ch] = map[[storage.KeyDigestSize]byte]uint64{}
		for k, seq := range m.keys[ch] {
			s.keys[ch][storage.KeyDigest(k)] = seq
		}
	}
	for k, v := range m.state {
		s.state = append(s.state, k+"="+v)
	}
	sort.Strings(s.state)
	return s
}

type heldView struct {
	tx    storage.Tx
	model *logModel
}

// TestLogStateMachine drives the backend with the log on through random
// commits and rollbacks (keyed appends with repeated keys, keys prepared
// together and looked up in or out of their order, wrong seqs,
// state puts and deletes), forced checkpoints, reads through views taken
// before later commits, close and reopen, and crashes (a handle dropped
// without Close), and compares every read with the model of the committed
// transactions.
func TestLogStateMachine(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		dir, err := os.MkdirTemp("", "logmodel")
		if err != nil {
			rt.Fatal(err)
		}
		defer os.RemoveAll(dir)
		path := filepath.Join(dir, "ledger.db")
		opts := bolt.Options{Log: bolt.LogOn, InitialMmapSize: 64 << 20, LogSegmentSizeBytes: 64 << 10,
			MemtableBytesMax: rapid.SampledFrom([]int64{1, 2 << 10, 1 << 30}).Draw(rt, "memtable")}
		b, err := bolt.Open(path, opts)
		if err != nil {
			rt.Fatal(err)
		}
		model := newLogModel()
		var views []heldView
		closeViews := func() {
			for _, v := range views {
				v.tx.Rollback()
			}
			views = nil
		}
		defer func() {
			closeViews()
			b.Close()
		}()
		chains := []string{"a", "b", "c"}
		keys := []string{"k1", "k2", "k3", "k4", "k5", "k6"}
		stateKeys := []string{"s1", "s2", "s3", "s4"}

		rt.Repeat(map[string]func(*rapid.T){
			"transaction": func(rt *rapid.T) {
				tx, err := b.Begin(ctx, true)
				if err != nil {
					rt.Fatal(err)
				}
				// A failed check ends the step here: the writer slot must be
				// released, or the Close that follows waits for it forever.
				defer tx.Rollback()
				pending := model.clone()
				// Keys prepared together (storage.KeyPreparer) must be
				// answered as if they were not, whichever keys are then
				// looked up in whatever order, and whatever the
				// transaction appends in between.
				var prepared []storage.ChainKey
				if rapid.Bool().Draw(rt, "prepare") {
					// Often all of one chain, so that keys the memory finds
					// sit between keys the file must answer.
					preparedChains := chains
					if rapid.Bool().Draw(rt, "prepare one chain") {
						preparedChains = []string{rapid.SampledFrom(chains).Draw(rt, "the prepared chain")}
					}
					for range rapid.IntRange(0, 10).Draw(rt, "prepared keys") {
						if len(prepared) > 0 && rapid.IntRange(0, 3).Draw(rt, "prepare a key twice") == 0 {
							prepared = append(prepared, rapid.SampledFrom(prepared).Draw(rt, "prepared again"))
							continue
						}
						prepared = append(prepared, storage.ChainKey{Chain: rapid.SampledFrom(preparedChains).Draw(rt, "prepared chain"),
							Key: rapid.SampledFrom(append([]string{""}, keys...)).Draw(rt, "prepared key")})
					}
					tx.(storage.KeyPreparer).PrepareKeys(ctx, prepared)
				}
				for range rapid.IntRange(1, 6).Draw(rt, "writes") {
					switch rapid.IntRange(0, 3).Draw(rt, "write") {
					case 0, 1:
						ch := rapid.SampledFrom(chains).Draw(rt, "chain")
						key := ""
						if rapid.Bool().Draw(rt, "keyed") {
							key = rapid.SampledFrom(keys).Draw(rt, "key")
						}
						fromPrepared := len(prepared) > 0 && rapid.IntRange(0, 3).Draw(rt, "the next prepared key") > 0
						if fromPrepared {
							ch, key = prepared[0].Chain, prepared[0].Key
							prepared = prepared[1:]
						}
						// The engine looks a key up before it appends it,
						// which is what a preparation is for.
						if key != "" && (fromPrepared || rapid.Bool().Draw(rt, "look up first")) {
							got, err := tx.LookupKey(ctx, ch, key)
							want, taken := pending.keys[ch][key]
							if (taken && (err != nil || got != want)) || (!taken && !errors.Is(err, storage.ErrNotFound)) {
								rt.Fatalf("lookup of %q in %q: %d, %v; want %d (present %v)", key, ch, got, err, want, taken)
							}
						}
						seq := uint64(len(pending.entries[ch]) + 1)
						data := fmt.Sprintf("%s-%d-%s", ch, seq, key)
						err := tx.Append(ctx, ch, storage.Record{Seq: seq, IdempotencyKey: key, Data: []byte(data)}, testHead(seq))
						_, taken := pending.keys[ch][key]
						switch {
						case key != "" && taken:
							if !errors.Is(err, storage.ErrDuplicate) {
								rt.Fatalf("append of taken key %q to %q: %v, want ErrDuplicate", key, ch, err)
							}
						case err != nil:
							rt.Fatalf("append to %q: %v", ch, err)
						default:
							pending.entries[ch] = append(pending.entries[ch], data)
							if key != "" {
								if pending.keys[ch] == nil {
									pending.keys[ch] = map[string]uint64{}
								}
								pending.keys[ch][key] = seq
							}
						}
					case 2:
						ch := rapid.SampledFrom(chains).Draw(rt, "chain")
						seq := uint64(len(pending.entries[ch])) + rapid.SampledFrom([]uint64{0, 2, 5}).Draw(rt, "wrong")
						if seq == 0 {
							seq = 7
						}
						err := tx.Append(ctx, ch, storage.Record{Seq: seq, Data: []byte("x")}, testHead(seq))
						if !errors.Is(err, storage.ErrDuplicate) {
							rt.Fatalf("append of seq %d to %q at %d: %v, want ErrDuplicate", seq, ch, len(pending.entries[ch]), err)
						}
					case 3:
						k := rapid.SampledFrom(stateKeys).Draw(rt, "state key")
						if rapid.Bool().Draw(rt, "delete") {
							if err := tx.StateDelete(ctx, []byte(k)); err != nil {
								rt.Fatal(err)
							}
							delete(pending.state, k)
						} else {
							v := rapid.StringMatching(`[a-z]{0,6}`).Draw(rt, "value")
							if err := tx.StatePut(ctx, []byte(k), []byte(v)); err != nil {
								rt.Fatal(err)
							}
							pending.state[k] = v
						}
					}
				}
				if got := readSnapshot(rt, tx); !got.equal(pending.snapshot()) {
					rt.Fatalf("the transaction reads %v, want its own writes %v", got, pending.snapshot())
				}
				if rapid.IntRange(0, 3).Draw(rt, "rollback") == 0 {
					if err := tx.Rollback(); err != nil {
						rt.Fatal(err)
					}
					return
				}
				if err := tx.Commit(); err != nil {
					rt.Fatal(err)
				}
				model = pending
			},
			"read": func(rt *rapid.T) {
				tx, err := b.Begin(ctx, false)
				if err != nil {
					rt.Fatal(err)
				}
				defer tx.Rollback()
				if got := readSnapshot(rt, tx); !got.equal(model.snapshot()) {
					rt.Fatalf("read %v, want %v", got, model.snapshot())
				}
				checkScans(rt, tx, model)
			},
			"hold a view": func(rt *rapid.T) {
				if len(views) >= 2 {
					rt.Skip("two views held")
				}
				tx, err := b.Begin(ctx, false)
				if err != nil {
					rt.Fatal(err)
				}
				views = append(views, heldView{tx: tx, model: model.clone()})
			},
			"read an old view": func(rt *rapid.T) {
				if len(views) == 0 {
					rt.Skip("no view held")
				}
				v := views[0]
				views = views[1:]
				defer v.tx.Rollback()
				if got := readSnapshot(rt, v.tx); !got.equal(v.model.snapshot()) {
					rt.Fatalf("an old view reads %v, want its snapshot %v", got, v.model.snapshot())
				}
				checkScans(rt, v.tx, v.model)
			},
			"checkpoint": func(rt *rapid.T) {
				if err := bolt.Checkpoint(b); err != nil {
					rt.Fatal(err)
				}
			},
			"reopen": func(rt *rapid.T) {
				closeViews()
				if err := b.Close(); err != nil {
					rt.Fatal(err)
				}
				if _, err := os.Stat(bolt.LogDirectory(path)); !errors.Is(err, os.ErrNotExist) {
					rt.Fatalf("log directory after Close: %v", err)
				}
				if b, err = bolt.Open(path, opts); err != nil {
					rt.Fatal(err)
				}
			},
			"crash": func(rt *rapid.T) {
				closeViews()
				bolt.Abandon(b)
				if b, err = bolt.Open(path, opts); err != nil {
					rt.Fatal(err)
				}
			},
		})
	})
}

// checkScans compares bounded and reverse state scans with the model.
func checkScans(rt *rapid.T, tx storage.Tx, m *logModel) {
	start := rapid.SampledFrom([]string{"", "s2", "s3"}).Draw(rt, "scan start")
	end := rapid.SampledFrom([]string{"", "s3", "s4"}).Draw(rt, "scan end")
	reverse := rapid.Bool().Draw(rt, "reverse")
	var want []string
	for k, v := range m.state {
		if k >= start && (end == "" || k < end) {
			want = append(want, k+"="+v)
		}
	}
	sort.Strings(want)
	if reverse {
		slices.Reverse(want)
	}
	var endKey []byte
	if end != "" {
		endKey = []byte(end)
	}
	var got []string
	for kv, err := range tx.StateScan(ctx, []byte(start), endKey, reverse) {
		if err != nil {
			rt.Fatal(err)
		}
		got = append(got, string(kv.Key)+"="+string(kv.Value))
	}
	if !slices.Equal(got, want) {
		rt.Fatalf("scan [%q, %q) reverse %v: %v, want %v", start, end, reverse, got, want)
	}
}
