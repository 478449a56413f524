package reliability

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"unsafe"

	bbolt "go.etcd.io/bbolt"

	"github.com/ledgerworks/ledger/chain"
	"github.com/ledgerworks/ledger/storage/bolt"
)

// Size of the ledger the tamper tests damage.
const (
	tamperChains           = 10
	tamperEntries          = 3000
	tamperEntriesPerUpdate = 100
	tamperValueTrials      = 600
	tamperFullVerifyEvery  = 25
)

// verifyFile opens the ledger at path read-only and verifies it.
func verifyFile(path string, opts chain.VerifyOptions) (chain.Report, error) {
	db, err := chain.Open(path, chain.Options{ReadOnly: true})
	if err != nil {
		return chain.Report{}, fmt.Errorf("open: %w", err)
	}
	defer db.Close()
	return db.Verify(context.Background(), opts)
}

// tamperLedger is a real ledger file and where each entry's stored bytes
// lie in it.
type tamperLedger struct {
	path     string
	data     []byte // the file's bytes
	pageSize int
	entries  []storedEntry
	chains   []string
	heads    map[string]chain.Head
}

// storedEntry is one entry and the file offset of its stored value.
type storedEntry struct {
	entry  chain.Entry
	offset int // of the value's first byte in the file
	length int
}

// The tamper tests share one ledger, built by the first that needs it;
// none of them changes its file.
var (
	sharedTamperMutex  sync.Mutex
	sharedTamperLedger *tamperLedger
)

// buildTamperLedger returns the shared tamper ledger, building it first.
func buildTamperLedger(t *testing.T) *tamperLedger {
	t.Helper()
	sharedTamperMutex.Lock()
	defer sharedTamperMutex.Unlock()
	if sharedTamperLedger == nil {
		folder, err := os.MkdirTemp("", "reliability-tamper-")
		if err != nil {
			t.Fatal(err)
		}
		atExit(func() { os.RemoveAll(folder) })
		sharedTamperLedger = writeTamperLedger(t, filepath.Join(folder, "ledger.db"))
	}
	return sharedTamperLedger
}

// writeTamperLedger writes tamperEntries entries over tamperChains chains,
// closes the file and locates every entry's value in it.
func writeTamperLedger(t *testing.T, path string) *tamperLedger {
	t.Helper()
	ctx := context.Background()
	db := openFile(t, path)
	random := rand.New(rand.NewPCG(1, 2))
	l := &tamperLedger{path: path, heads: map[string]chain.Head{}}
	for i := range tamperChains {
		name, err := chain.ScopedName("tamper", "raw", "chain-"+strconv.Itoa(i))
		if err != nil {
			t.Fatal(err)
		}
		l.chains = append(l.chains, name)
	}
	for n := 0; n < tamperEntries; n += tamperEntriesPerUpdate {
		err := db.Update(ctx, func(tx *chain.Tx) error {
			for i := n; i < n+tamperEntriesPerUpdate; i++ {
				req := chain.Request{Chain: l.chains[random.IntN(len(l.chains))], Type: "tamper.raw/v1",
					Payload: []byte(strings.Repeat(fmt.Sprintf("entry %d;", i), 1+random.IntN(30)))}
				if i%3 != 0 {
					req.IdempotencyKey = "key-" + strconv.Itoa(i)
				}
				if _, err := tx.Append(req); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range l.chains {
		h, err := db.Head(ctx, c)
		if err != nil {
			t.Fatal(err)
		}
		l.heads[c] = h
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	raw, err := bbolt.Open(path, bolt.FileMode, &bbolt.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	info := raw.Info()
	l.pageSize = info.PageSize
	err = raw.View(func(btx *bbolt.Tx) error {
		for _, c := range l.chains {
			id, err := bolt.ChainID(btx, c)
			if err != nil {
				return err
			}
			for seq := uint64(1); seq <= l.heads[c].Seq; seq++ {
				v := bolt.RawEntry(btx, id, seq)
				if v == nil {
					return fmt.Errorf("%s seq %d missing", c, seq)
				}
				e, err := chain.DecodeRecord(c, seq, v)
				if err != nil {
					return err
				}
				// A read transaction's values point into bbolt's map of
				// the file, so the distance from the map's start is the
				// value's offset in the file.
				offset := int(uintptr(unsafe.Pointer(&v[0])) - info.Data)
				l.entries = append(l.entries, storedEntry{entry: e, offset: offset, length: len(v)})
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if l.data, err = os.ReadFile(path); err != nil {
		t.Fatal(err)
	}
	for _, s := range l.entries {
		if s.offset < 0 || s.offset+s.length > len(l.data) {
			t.Fatalf("entry %s/%d located outside the file", s.entry.Chain, s.entry.Seq)
		}
	}
	return l
}

// recordField names the field of a stored record that holds byte i.
func recordField(e *chain.Entry, i int) string {
	bounds := []struct {
		name string
		end  int
	}{{"version", 1}, {"time", 9}, {"prev_hash", 41}, {"hash", 73}}
	end := 73
	for _, f := range []struct {
		name string
		n    int
	}{{"key", len(e.IdempotencyKey)}, {"type", len(e.Type)}, {"payload", len(e.Payload)}} {
		bounds = append(bounds, struct {
			name string
			end  int
		}{f.name + " length", end + 4})
		end += 4
		bounds = append(bounds, struct {
			name string
			end  int
		}{f.name, end + f.n})
		end += f.n
	}
	for _, b := range bounds {
		if i < b.end {
			return b.name
		}
	}
	return "beyond"
}

// damagedCopy writes the ledger's bytes to a new file with change applied.
func (l *tamperLedger) damagedCopy(t *testing.T, name string, change func(data []byte)) string {
	t.Helper()
	data := slices.Clone(l.data)
	change(data)
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestTamperEveryEntryByteChangeIsReported changes one random byte inside
// the stored value of a random entry of a real ledger file (on a fresh copy
// each time, written straight into the file) and expects Verify to report
// that entry's chain and seq first, and nothing in any other chain or
// before it. It prints how many changes of each field were tried and found.
func TestTamperEveryEntryByteChangeIsReported(t *testing.T) {
	t.Parallel()
	l := buildTamperLedger(t)
	random := rand.New(rand.NewPCG(3, 4))
	type tally struct{ tried, detected int }
	byField := map[string]*tally{}
	reasons := map[chain.Reason]int{}
	// Each trial changes one byte of a copy of the file and puts it back
	// afterwards (a read-only open writes nothing), which leaves the copy
	// identical to a fresh one without rewriting megabytes per trial.
	trial := filepath.Join(t.TempDir(), "trial.db")
	copyFile(t, l.path, trial)
	file, err := os.OpenFile(trial, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer file.Close()
	for n := range tamperValueTrials {
		s := l.entries[random.IntN(len(l.entries))]
		i := random.IntN(s.length)
		flip := byte(1 + random.IntN(255))
		field := recordField(&s.entry, i)
		if byField[field] == nil {
			byField[field] = &tally{}
		}
		byField[field].tried++
		offset := int64(s.offset + i)
		if _, err := file.WriteAt([]byte{l.data[offset] ^ flip}, offset); err != nil {
			t.Fatal(err)
		}
		// Verifying one chain is five times cheaper than all of them; every
		// tamperFullVerifyEvery-th trial verifies every chain, which also
		// shows that no other chain is reported.
		opts := chain.VerifyOptions{Chains: []string{s.entry.Chain}}
		if n%tamperFullVerifyEvery == 0 {
			opts = chain.VerifyOptions{}
		}
		report, err := verifyFile(trial, opts)
		if _, err := file.WriteAt(l.data[offset:offset+1], offset); err != nil {
			t.Fatal(err)
		}
		if err != nil {
			t.Errorf("trial %d: %s seq %d byte %d (%s) ^%#x: %v", n, s.entry.Chain, s.entry.Seq, i, field, flip, err)
			continue
		}
		if detail := reportsAt(report.Failures, s.entry.Chain, s.entry.Seq); detail != "" {
			t.Errorf("trial %d: %s seq %d byte %d (%s) ^%#x: %s", n, s.entry.Chain, s.entry.Seq, i, field, flip, detail)
			continue
		}
		byField[field].detected++
		reasons[report.Failures[0].Reason]++
	}
	var lines []string
	total := tally{}
	for _, field := range []string{"version", "time", "prev_hash", "hash", "key length", "key", "type length", "type", "payload length", "payload"} {
		if c := byField[field]; c != nil {
			lines = append(lines, fmt.Sprintf("  %-15s %5d tried %5d detected", field, c.tried, c.detected))
			total.tried += c.tried
			total.detected += c.detected
		}
	}
	t.Logf("tamper: single-byte changes in the stored entries of a %d-entry, %d-chain file (%d bytes):\n%s\n  %-15s %5d tried %5d detected at the right chain and seq\n  first failure reasons: %v",
		len(l.entries), len(l.chains), len(l.data), strings.Join(lines, "\n"), "total", total.tried, total.detected, reasons)
	if restored, err := os.ReadFile(trial); err != nil || !bytes.Equal(restored, l.data) {
		t.Fatalf("the trial file was not restored after each trial (%v)", err)
	}
	if total.tried != tamperValueTrials {
		t.Fatalf("counted %d trials of %d", total.tried, tamperValueTrials)
	}
}

// reportsAt returns "" when failures start at (chainName, seq) and touch no
// other chain and no earlier entry, else what is wrong.
func reportsAt(failures []chain.Failure, chainName string, seq uint64) string {
	if len(failures) == 0 {
		return "not detected"
	}
	if f := failures[0]; f.Chain != chainName || f.Seq != seq {
		return fmt.Sprintf("first failure at %s seq %d (%s)", f.Chain, f.Seq, f.Reason)
	}
	for _, f := range failures {
		if f.Chain != chainName || f.Seq < seq {
			return fmt.Sprintf("also reported %v", f)
		}
	}
	return ""
}

// chainRecordOffset returns the file offset of a chain's value in the
// chains bucket: u64be id | u64be head seq | head hash | i64be head time.
// The chains bucket of a small ledger is inline in the root page, whose
// values bbolt copies, so the value is found by its bytes inside the root
// page that the current meta page names (stale copies lie in freed pages).
func (l *tamperLedger) chainRecordOffset(t *testing.T, chainName string) int {
	t.Helper()
	raw, err := bbolt.Open(l.path, bolt.FileMode, &bbolt.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	var value []byte
	err = raw.View(func(btx *bbolt.Tx) error {
		value = slices.Clone(btx.Bucket(bolt.BucketChains).Get([]byte(chainName)))
		return nil
	})
	raw.Close()
	if err != nil || len(value) != 56 {
		t.Fatalf("chain record of %s: %x (%v)", chainName, value, err)
	}
	root := l.rootPage()
	page := l.data[root*l.pageSize : (root+1)*l.pageSize]
	i := bytes.Index(page, value)
	if i < 0 || bytes.Contains(page[i+1:], value) {
		t.Fatalf("chain record of %s is not once in root page %d", chainName, root)
	}
	return root*l.pageSize + i
}

// Layout of a bbolt meta page, after the 16-byte page header: magic,
// version, page size, flags (4 bytes each), root bucket (root pgid,
// sequence), freelist pgid, high-water pgid, txid, checksum (8 bytes each).
const (
	pageHeaderSize   = 16
	metaRootOffset   = pageHeaderSize + 16
	metaTxidOffset   = pageHeaderSize + 16 + 16 + 8 + 8
	metaChecksumSize = 8
)

// rootPage returns the root page id named by the newer meta page.
func (l *tamperLedger) rootPage() int {
	newer := 0
	txid := func(meta int) uint64 {
		return binary.LittleEndian.Uint64(l.data[meta*l.pageSize+metaTxidOffset:])
	}
	if txid(1) > txid(0) {
		newer = 1
	}
	return int(binary.LittleEndian.Uint64(l.data[newer*l.pageSize+metaRootOffset:]))
}

// TestTamperStoredHeadIsReported changes a byte of a chain's stored head
// seq or hash: Verify reports a head mismatch on that chain.
func TestTamperStoredHeadIsReported(t *testing.T) {
	t.Parallel()
	l := buildTamperLedger(t)
	random := rand.New(rand.NewPCG(5, 6))
	offsets := map[string]int{}
	for _, c := range l.chains {
		offsets[c] = l.chainRecordOffset(t, c)
	}
	tried, detected := 0, 0
	for n := range 60 {
		c := l.chains[n%len(l.chains)]
		offset := offsets[c]
		i := 8 + random.IntN(8+32) // the head's seq and hash
		path := l.damagedCopy(t, "head.db", func(data []byte) { data[offset+i] ^= byte(1 + random.IntN(255)) })
		report, err := verifyFile(path, chain.VerifyOptions{Chains: []string{c}})
		tried++
		if err != nil {
			t.Errorf("head byte %d of %s: verify error %v", i, c, err)
			continue
		}
		found := slices.ContainsFunc(report.Failures, func(f chain.Failure) bool {
			return f.Chain == c && f.Reason == chain.ReasonHeadMismatch
		})
		if !found {
			t.Errorf("head byte %d of %s changed: failures %v, want a head mismatch", i, c, report.Failures)
			continue
		}
		detected++
	}
	t.Logf("tamper: stored heads (seq and hash): %d changes tried, %d detected", tried, detected)
}

// TestTamperStoredHeadTimeIsReported changes a byte of a chain's stored
// head time, which new entries' times are floored to.
func TestTamperStoredHeadTimeIsReported(t *testing.T) {
	t.Parallel()
	l := buildTamperLedger(t)
	c := l.chains[0]
	offset := l.chainRecordOffset(t, c)
	path := l.damagedCopy(t, "head-time.db", func(data []byte) { data[offset+48] ^= 0x01 })
	db, err := chain.Open(path, chain.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	report, err := db.Verify(context.Background(), chain.VerifyOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(report.Failures, func(f chain.Failure) bool { return f.Chain == c && f.Reason == chain.ReasonHeadMismatch }) {
		t.Errorf("a changed head time goes unreported (failures: %v); later entries would be floored to it", report.Failures)
	}
}

// TestTamperKeyIndexIsReported points an idempotency key's index entry at
// another seq: a retry with that key would be answered from the wrong entry
// (or refused), so Verify must report it. The index is reached through
// bolt.KeySeq and bolt.SetKeySeq, which find the key wherever the layout
// keeps it (the recent keys or a run).
func TestTamperKeyIndexIsReported(t *testing.T) {
	t.Parallel()
	db, path := newFile(t)
	c := mustChain(chain.ScopedName("tamper", "raw", "keys"))
	var target chain.Entry
	for i := 1; i <= 5; i++ {
		res := mustAppend(t, db, chain.Request{Chain: c, IdempotencyKey: "key-" + strconv.Itoa(i), Type: "raw/v1",
			Payload: []byte("entry " + strconv.Itoa(i))})
		if i == 3 {
			target = res.Entry
		}
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	raw, err := bbolt.Open(path, bolt.FileMode, bolt.BboltOptions(bolt.Options{}))
	if err != nil {
		t.Fatal(err)
	}
	err = raw.Update(func(btx *bbolt.Tx) error {
		seq, err := bolt.KeySeq(btx, c, target.IdempotencyKey)
		if err != nil {
			return err
		}
		if seq != target.Seq {
			return fmt.Errorf("key %q: the index holds seq %d, want %d", target.IdempotencyKey, seq, target.Seq)
		}
		return bolt.SetKeySeq(btx, c, target.IdempotencyKey, target.Seq-1)
	})
	raw.Close()
	if err != nil {
		t.Fatal(err)
	}
	db = openFile(t, path)
	report, err := db.Verify(context.Background(), chain.VerifyOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(report.Failures, func(f chain.Failure) bool {
		return f.Chain == c && f.Seq == target.Seq && f.Reason == chain.ReasonKeyIndexMismatch
	}) {
		res, appendErr := db.Append(context.Background(), chain.Request{Chain: c,
			IdempotencyKey: target.IdempotencyKey, Type: target.Type, Payload: target.Payload})
		t.Errorf("a key index entry pointing elsewhere goes unreported (failures: %v); key %q now points at seq %d, "+
			"and a retry of the request stored at seq %d gets: seq %d replayed=%v err=%v",
			report.Failures, target.IdempotencyKey, target.Seq-1, target.Seq, res.Entry.Seq, res.Replayed, appendErr)
	}
}
