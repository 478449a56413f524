package chain_test

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"

	"pgregory.net/rapid"

	"github.com/ledgerworks/ledger/chain"
	"github.com/ledgerworks/ledger/storage/bolt"
	"github.com/ledgerworks/ledger/storage/storagetest"
)

// ledgerModel is the plain in-memory ledger the engine is compared with.
type ledgerModel struct {
	entries map[string][]chain.Entry
	keys    map[string]map[string]int // chain → key → index in entries
}

func newLedgerModel() *ledgerModel {
	return &ledgerModel{entries: map[string][]chain.Entry{}, keys: map[string]map[string]int{}}
}

// clone copies the model deeply enough for a dry run.
func (m *ledgerModel) clone() *ledgerModel {
	c := newLedgerModel()
	for ch, entries := range m.entries {
		c.entries[ch] = slices.Clone(entries)
	}
	for ch, keys := range m.keys {
		c.keys[ch] = maps.Clone(keys)
	}
	return c
}

// expect says what appending req does: a replay of an existing entry, a
// conflict, or (both nil) a new entry.
func (m *ledgerModel) expect(req chain.Request) (replay *chain.Entry, conflict *chain.ConflictError) {
	if req.IdempotencyKey == "" {
		return nil, nil
	}
	i, ok := m.keys[req.Chain][req.IdempotencyKey]
	if !ok {
		return nil, nil
	}
	e := m.entries[req.Chain][i]
	if e.Type == req.Type && bytes.Equal(e.Payload, req.Payload) {
		return &e, nil
	}
	return nil, &chain.ConflictError{Chain: req.Chain, IdempotencyKey: req.IdempotencyKey, ExistingSeq: e.Seq,
		Expected: chain.Fingerprint(e.Type, e.Payload), Calculated: chain.Fingerprint(req.Type, req.Payload)}
}

// add records a new entry.
func (m *ledgerModel) add(e chain.Entry) {
	if e.IdempotencyKey != "" {
		if m.keys[e.Chain] == nil {
			m.keys[e.Chain] = map[string]int{}
		}
		m.keys[e.Chain][e.IdempotencyKey] = len(m.entries[e.Chain])
	}
	m.entries[e.Chain] = append(m.entries[e.Chain], e)
}

// head is the head the chain should have.
func (m *ledgerModel) head(ch string) (chain.Head, bool) {
	entries := m.entries[ch]
	if len(entries) == 0 {
		return chain.Head{}, false
	}
	return entries[len(entries)-1].Head(), true
}

// checkResult compares what the engine returned for req with the model and
// records a new entry.
func (m *ledgerModel) checkResult(t *rapid.T, req chain.Request, res chain.Result, err error) {
	replay, conflict := m.expect(req)
	switch {
	case conflict != nil:
		var got *chain.ConflictError
		if !errors.As(err, &got) || !errors.Is(err, chain.ErrIdempotencyConflict) || *got != *conflict {
			t.Fatalf("%+v: got %+v %v, want conflict %+v", req, res, err, conflict)
		}
	case err != nil:
		t.Fatalf("%+v: %v", req, err)
	case replay != nil:
		if !res.Replayed || !reflect.DeepEqual(res.Entry, *replay) {
			t.Fatalf("%+v: got %+v, want replay of %+v", req, res, *replay)
		}
	default:
		e := res.Entry
		prev := chain.Head{Hash: chain.Genesis(req.Chain)}
		if h, ok := m.head(req.Chain); ok {
			prev = h
		}
		if res.Replayed || e.Chain != req.Chain || e.Seq != prev.Seq+1 || e.PrevHash != prev.Hash ||
			e.IdempotencyKey != req.IdempotencyKey || e.Type != req.Type || !bytes.Equal(e.Payload, req.Payload) ||
			e.Hash != e.ComputeHash() || e.TimeUnixNano < prev.TimeUnixNano {
			t.Fatalf("%+v: new entry %+v does not continue %+v", req, res, prev)
		}
		m.add(e)
	}
}

// ledgerMachine drives a DB and the model with the same operations. Test
// cases share one store; each writes only chains under its own prefix.
type ledgerMachine struct {
	db     *chain.DB
	path   string // empty when the backend cannot be reopened
	opts   chain.Options
	model  *ledgerModel
	ctx    context.Context
	prefix string
	chains []string
}

func newLedgerMachine(db *chain.DB, path string, opts chain.Options, testCase int) *ledgerMachine {
	m := &ledgerMachine{db: db, path: path, opts: opts, model: newLedgerModel(), ctx: context.Background(),
		prefix: fmt.Sprintf("case-%04d/", testCase)}
	for _, ch := range modelChains {
		m.chains = append(m.chains, m.prefix+ch)
	}
	return m
}

var (
	modelChains   = []string{"a", "b", "tenant/fin/ü", "c"}
	modelKeys     = []string{"", "", "k1", "k2", "k3", "k4", "k5"}
	modelTypes    = []string{"t/v1", "t/v2"}
	modelPayloads = []string{"", "x", "y"}
	errRefused    = errors.New("refused halfway")
)

func (m *ledgerMachine) drawRequest(t *rapid.T, label string) chain.Request {
	return chain.Request{
		Chain:          m.prefix + rapid.SampledFrom(modelChains).Draw(t, label+" chain"),
		IdempotencyKey: rapid.SampledFrom(modelKeys).Draw(t, label+" key"),
		Type:           rapid.SampledFrom(modelTypes).Draw(t, label+" type"),
		Payload:        []byte(rapid.SampledFrom(modelPayloads).Draw(t, label+" payload")),
	}
}

func (m *ledgerMachine) drawRequests(t *rapid.T, countMax int) []chain.Request {
	n := rapid.IntRange(1, countMax).Draw(t, "requests")
	reqs := make([]chain.Request, n)
	for i := range reqs {
		reqs[i] = m.drawRequest(t, fmt.Sprint("request ", i))
	}
	return reqs
}

// appendAll appends reqs in one transaction and returns the results of its
// last run: with one AppendBatch when batch is set, else one Append each.
func appendAll(tx *chain.Tx, reqs []chain.Request, batch bool) ([]chain.Result, error) {
	if batch {
		return tx.AppendBatch(reqs, nil)
	}
	results := make([]chain.Result, 0, len(reqs))
	for _, req := range reqs {
		res, err := tx.Append(req)
		if err != nil {
			return results, err
		}
		results = append(results, res)
	}
	return results, nil
}

func (m *ledgerMachine) append(t *rapid.T) {
	req := m.drawRequest(t, "request")
	res, err := m.db.Append(m.ctx, req)
	m.model.checkResult(t, req, res, err)
}

// update appends to several chains in one Update: all or nothing.
func (m *ledgerMachine) update(t *rapid.T) {
	reqs := m.drawRequests(t, 5)
	conflict := m.model.firstConflict(reqs)
	batch := rapid.Bool().Draw(t, "batch")
	var results []chain.Result
	err := m.db.Update(m.ctx, func(tx *chain.Tx) error {
		var err error
		results, err = appendAll(tx, reqs, batch)
		return err
	})
	if conflict != nil {
		var got *chain.ConflictError
		if !errors.As(err, &got) || got.Chain != conflict.Chain || got.IdempotencyKey != conflict.IdempotencyKey ||
			got.ExistingSeq != conflict.ExistingSeq {
			t.Fatalf("update %+v: %v, want conflict %+v", reqs, err, conflict)
		}
		if failing := len(results); reqs[failing].Chain != conflict.Chain || reqs[failing].IdempotencyKey != conflict.IdempotencyKey {
			t.Fatalf("update %+v: %d results before the conflict %+v", reqs, failing, conflict)
		}
		return
	}
	if err != nil || len(results) != len(reqs) {
		t.Fatalf("update %+v: %d results, %v", reqs, len(results), err)
	}
	for i, req := range reqs {
		m.model.checkResult(t, req, results[i], nil)
	}
}

// firstConflict returns the first conflict that reqs meet when appended in
// order in one transaction, which fails the whole of it, or nil: a dry run
// on a copy of the model.
func (m *ledgerModel) firstConflict(reqs []chain.Request) *chain.ConflictError {
	dry := m.clone()
	for _, req := range reqs {
		replay, c := dry.expect(req)
		if c != nil {
			return c
		}
		if replay == nil {
			dry.add(chain.Entry{Chain: req.Chain, Seq: uint64(len(dry.entries[req.Chain]) + 1),
				IdempotencyKey: req.IdempotencyKey, Type: req.Type, Payload: req.Payload})
		}
	}
	return nil
}

// appendBatch appends with DB.AppendBatch: one transaction, or the
// entries read without the writer when every request is a retry. A batch
// of the keys already stored, with their own requests, comes often from
// a retried batch: drawn half of the time.
func (m *ledgerMachine) appendBatch(t *rapid.T) {
	reqs := m.drawRequests(t, 6)
	if stored := m.model.storedRequests(); len(stored) > 0 && rapid.Bool().Draw(t, "retry") {
		reqs = reqs[:0]
		for range rapid.IntRange(1, 6).Draw(t, "retries") {
			reqs = append(reqs, rapid.SampledFrom(stored).Draw(t, "retried"))
		}
	}
	conflict := m.model.firstConflict(reqs)
	given := []chain.Result{{Entry: chain.Entry{Chain: "given"}}}
	results, err := m.db.AppendBatch(m.ctx, reqs, given)
	if len(results) == 0 || results[0].Entry.Chain != "given" {
		t.Fatalf("append batch %+v: the given results were not kept: %+v", reqs, results)
	}
	results = results[1:]
	if conflict != nil {
		var got *chain.ConflictError
		if !errors.As(err, &got) || got.Chain != conflict.Chain || got.IdempotencyKey != conflict.IdempotencyKey ||
			got.ExistingSeq != conflict.ExistingSeq {
			t.Fatalf("append batch %+v: %v, want conflict %+v", reqs, err, conflict)
		}
		if len(results) != 0 {
			t.Fatalf("append batch %+v failed with %d results", reqs, len(results))
		}
		return
	}
	if err != nil || len(results) != len(reqs) {
		t.Fatalf("append batch %+v: %d results, %v", reqs, len(results), err)
	}
	for i, req := range reqs {
		m.model.checkResult(t, req, results[i], nil)
	}
}

// storedRequests returns the requests of the model's entries that carry
// a key.
func (m *ledgerModel) storedRequests() []chain.Request {
	var reqs []chain.Request
	for _, ch := range slices.Sorted(maps.Keys(m.entries)) {
		for _, e := range m.entries[ch] {
			if e.IdempotencyKey != "" {
				reqs = append(reqs, chain.Request{Chain: e.Chain, IdempotencyKey: e.IdempotencyKey, Type: e.Type, Payload: e.Payload})
			}
		}
	}
	return reqs
}

// failingUpdate appends and then fails: nothing may remain.
func (m *ledgerMachine) failingUpdate(t *rapid.T) {
	reqs := m.drawRequests(t, 4)
	batch := rapid.Bool().Draw(t, "batch")
	err := m.db.Update(m.ctx, func(tx *chain.Tx) error {
		if _, err := appendAll(tx, reqs, batch); err != nil {
			return err
		}
		if err := tx.StatePut([]byte("refused"), []byte("v")); err != nil {
			return err
		}
		return errRefused
	})
	if !errors.Is(err, errRefused) && !errors.Is(err, chain.ErrIdempotencyConflict) {
		t.Fatalf("failing update: %v", err)
	}
}

// panickingUpdate appends and then panics: the panic reaches the caller and
// nothing may remain.
func (m *ledgerMachine) panickingUpdate(t *rapid.T) {
	reqs := m.drawRequests(t, 3)
	batch := rapid.Bool().Draw(t, "batch")
	recovered := func() (p any) {
		defer func() { p = recover() }()
		m.db.Update(m.ctx, func(tx *chain.Tx) error {
			appendAll(tx, reqs, batch)
			panic(errRefused)
		})
		return nil
	}()
	if recovered != errRefused {
		t.Fatalf("panicking update recovered %v", recovered)
	}
}

func (m *ledgerMachine) invalidAppend(t *rapid.T) {
	req := m.drawRequest(t, "request")
	switch rapid.IntRange(0, 2).Draw(t, "defect") {
	case 0:
		req.Chain = ""
	case 1:
		req.IdempotencyKey = "bad\x00key"
	case 2:
		req.Type = string(make([]byte, chain.TypeLengthMax+1))
	}
	if _, err := m.db.Append(m.ctx, req); !errors.Is(err, chain.ErrInvalid) {
		t.Fatalf("invalid %+v: %v", req, err)
	}
}

func (m *ledgerMachine) reopen(t *rapid.T) {
	if m.path == "" {
		t.Skip("backend cannot be reopened")
	}
	if err := m.db.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
	db, err := chain.Open(m.path, m.opts)
	if err != nil {
		t.Fatalf("reopen: %v", err)
	}
	m.db = db
}

// checkHeads is the invariant checked after every step: the chains and
// their heads agree with the model.
func (m *ledgerMachine) checkHeads(t *rapid.T) {
	var chains []string
	for h, err := range m.db.Chains(m.ctx, m.prefix) {
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(h.Chain, m.prefix) {
			break
		}
		want, _ := m.model.head(h.Chain)
		if h != want {
			t.Fatalf("listed head %+v, model %+v", h, want)
		}
		chains = append(chains, h.Chain)
	}
	if want := slices.Sorted(maps.Keys(m.model.entries)); !slices.Equal(chains, want) {
		t.Fatalf("chains %q, model %q", chains, want)
	}
}

// readBack compares every read of the engine with the model, and verifies.
func (m *ledgerMachine) readBack(t *rapid.T) {
	m.checkHeads(t)
	for _, ch := range m.chains {
		want, exists := m.model.head(ch)
		if !exists {
			want = chain.Head{Chain: ch, Hash: chain.Genesis(ch)} // returned with ErrNotFound
		}
		head, err := m.db.Head(m.ctx, ch)
		if exists != (err == nil) || head != want {
			t.Fatalf("head of %q: %+v %v, model %+v", ch, head, err, want)
		}
		var entries []chain.Entry
		for e, err := range m.db.Entries(m.ctx, ch, 1) {
			if err != nil {
				t.Fatal(err)
			}
			entries = append(entries, e)
		}
		if !reflect.DeepEqual(entries, m.model.entries[ch]) {
			t.Fatalf("entries of %q:\n got  %+v\n want %+v", ch, entries, m.model.entries[ch])
		}
		for _, want := range m.model.entries[ch] {
			if got, err := m.db.Get(m.ctx, ch, want.Seq); err != nil || !reflect.DeepEqual(got, want) {
				t.Fatalf("get %q %d: %+v %v, model %+v", ch, want.Seq, got, err, want)
			}
		}
		if _, err := m.db.Get(m.ctx, ch, uint64(len(entries)+1)); !errors.Is(err, chain.ErrNotFound) {
			t.Fatalf("get past the head of %q: %v", ch, err)
		}
		for _, key := range modelKeys[2:] {
			e, err := m.db.Lookup(m.ctx, ch, key)
			i, ok := m.model.keys[ch][key]
			switch {
			case ok && (err != nil || !reflect.DeepEqual(e, m.model.entries[ch][i])):
				t.Fatalf("lookup %q %q: %+v %v", ch, key, e, err)
			case !ok && !errors.Is(err, chain.ErrNotFound):
				t.Fatalf("lookup %q %q: %+v %v, want ErrNotFound", ch, key, e, err)
			}
		}
	}
	err := m.db.View(m.ctx, func(tx *chain.Tx) error {
		if _, err := tx.StateGet([]byte("refused")); !errors.Is(err, chain.ErrNotFound) {
			return fmt.Errorf("state of a failed update: %v", err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	report, err := m.db.Verify(m.ctx, chain.VerifyOptions{Chains: m.chains})
	if err != nil || !report.OK() {
		t.Fatalf("verify: %+v %v", report, err)
	}
}

func TestLedgerAgainstModel(t *testing.T) {
	// Batches of two requests or more are hashed ahead (see AppendBatch),
	// beside the one-at-a-time appends the machine draws as well.
	atLeastTwoProcs(t)
	defer chain.LowerHashAheadPartMin(2)()
	for _, f := range storagetest.Factories(t) {
		t.Run(f.Name, func(t *testing.T) {
			backend := f.Open(t)
			path := ""
			if b, ok := backend.(*bolt.Backend); ok {
				path = b.Path()
			}
			if path == "" {
				// A server backend pays a round trip per action and cannot
				// reopen: it runs a quarter of the cases (-rapid.checks).
				defer scaleRapidChecks(t, 4)()
			}
			opts := chain.Options{Clock: testClock()}
			db, err := chain.OpenBackend(backend, opts)
			if err != nil {
				t.Fatal(err)
			}
			defer func() { db.Close() }()
			testCase := 0
			rapid.Check(t, func(rt *rapid.T) {
				testCase++
				m := newLedgerMachine(db, path, opts, testCase)
				defer func() { db = m.db }() // reopen replaces it
				rt.Repeat(map[string]func(*rapid.T){
					"append":          m.append,
					"update":          m.update,
					"appendBatch":     m.appendBatch,
					"failingUpdate":   m.failingUpdate,
					"panickingUpdate": m.panickingUpdate,
					"invalidAppend":   m.invalidAppend,
					"reopen":          m.reopen,
					"readBack":        m.readBack,
					"":                m.checkHeads,
				})
				m.readBack(rt)
			})
		})
	}
}

// scaleRapidChecks divides rapid's -rapid.checks by divisor until the
// returned function restores it.
func scaleRapidChecks(t *testing.T, divisor int) (restore func()) {
	t.Helper()
	f := flag.Lookup("rapid.checks")
	if f == nil {
		return func() {}
	}
	old := f.Value.String()
	checks, err := strconv.Atoi(old)
	if err != nil {
		t.Fatalf("-rapid.checks %q: %v", old, err)
	}
	if err := f.Value.Set(strconv.Itoa(max(1, checks/divisor))); err != nil {
		t.Fatal(err)
	}
	return func() { f.Value.Set(old) }
}
