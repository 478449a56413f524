package reliability

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	bbolt "go.etcd.io/bbolt"

	"github.com/ledgerworks/ledger/chain"
	"github.com/ledgerworks/ledger/storage/bolt"
)

// pageTypes returns the type bbolt gives each page of the ledger file
// ("meta", "branch", "leaf", "free", …), read from an opened copy.
func (l *tamperLedger) pageTypes(t *testing.T) []string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "pages.db")
	copyFile(t, l.path, path)
	raw, err := bbolt.Open(path, bolt.FileMode, bolt.BboltOptions(bolt.Options{}))
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	var types []string
	err = raw.View(func(btx *bbolt.Tx) error {
		for id := 0; ; id++ {
			info, err := btx.Page(id)
			if err != nil {
				return err
			}
			if info == nil {
				return nil
			}
			types = append(types, info.Type)
			for range info.OverflowCount {
				types = append(types, "overflow")
				id++
			}
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	return types
}

// headerPage returns the page whose header covers page id: entries are
// stored several to a value, and a value larger than a page goes on over
// overflow pages, which have none.
func headerPage(types []string, id int) int {
	for id > 0 && types[id] == "overflow" {
		id--
	}
	return id
}

// structureDamage is one change to the file's own structure and what
// ledgerctl verify may answer.
type structureDamage struct {
	name   string
	change func(data []byte)
	// verifyExits are the exit codes verify may give.
	verifyExits []int
}

// TestTamperFileStructureFailsCleanly damages the file's own structure —
// meta pages, page headers, a branch page's child pointer, the file's
// length, random bytes over in-use pages — and runs ledgerctl verify, log
// and append on each damaged copy: none may panic; each that fails exits 5
// (1 for verify when it read the damage as broken chains) with one line of
// message. One damaged meta page is survived (bbolt keeps two).
func TestTamperFileStructureFailsCleanly(t *testing.T) {
	t.Parallel()
	l := buildTamperLedger(t)
	types := l.pageTypes(t)
	ps := l.pageSize
	pagesOf := func(kind string) []int {
		var ids []int
		for id, typ := range types {
			if typ == kind {
				ids = append(ids, id)
			}
		}
		return ids
	}
	branches, leaves := pagesOf("branch"), pagesOf("leaf")
	if len(branches) == 0 || len(leaves) == 0 {
		t.Fatalf("ledger of %d pages has %d branch and %d leaf pages; want both", len(types), len(branches), len(leaves))
	}
	// The leaf page that holds a mid-chain entry, and the branch page above
	// most entries (the entries bucket's root: the branch with most keys).
	entryLeaf := headerPage(types, l.entries[len(l.entries)/2].offset/ps)
	branch := branches[0]
	for _, id := range branches {
		if count(l.data, id, ps) > count(l.data, branch, ps) {
			branch = id
		}
	}
	setFlags := func(id int, flags uint16) func([]byte) {
		return func(d []byte) { binary.LittleEndian.PutUint16(d[id*ps+8:], flags) }
	}
	cases := []structureDamage{
		{"meta page 0 zeroed", zeroPage(0, ps), []int{0}},
		{"meta page 1 zeroed", zeroPage(1, ps), []int{0}},
		{"both meta pages zeroed", func(d []byte) { zeroPage(0, ps)(d); zeroPage(1, ps)(d) }, []int{5}},
		{"both meta checksums changed", func(d []byte) {
			d[0*ps+metaTxidOffset+8] ^= 0xff
			d[1*ps+metaTxidOffset+8] ^= 0xff
		}, []int{5}},
		{"both meta root pointers beyond the file", func(d []byte) {
			for meta := range 2 {
				binary.LittleEndian.PutUint64(d[meta*ps+metaRootOffset:], 1<<40)
				resealMeta(d[meta*ps:])
			}
		}, []int{5}},
		{"entry leaf page flags garbage", setFlags(entryLeaf, 0x4000), []int{5}},
		{"entry leaf page marked branch", setFlags(entryLeaf, 0x01), []int{1, 5}},
		{"entry leaf page count 0xffff", func(d []byte) { binary.LittleEndian.PutUint16(d[entryLeaf*ps+10:], 0xffff) }, []int{1, 5}},
		{"entry leaf page count 0", func(d []byte) { binary.LittleEndian.PutUint16(d[entryLeaf*ps+10:], 0) }, []int{1, 5}},
		// The overflow count only matters to the page's extent: entries stay
		// readable and intact, so verify may pass.
		{"entry leaf page overflow huge", func(d []byte) { binary.LittleEndian.PutUint32(d[entryLeaf*ps+12:], 1<<30) }, []int{0, 1, 5}},
		{"branch page flags garbage", setFlags(branch, 0x4000), []int{5}},
		{"branch page child pointer beyond the file", func(d []byte) {
			// The first branch element: pos u32, ksize u32, pgid u64.
			binary.LittleEndian.PutUint64(d[branch*ps+pageHeaderSize+8:], 1<<40)
		}, []int{1, 5}},
		{"branch page child pointer to a meta page", func(d []byte) {
			binary.LittleEndian.PutUint64(d[branch*ps+pageHeaderSize+8:], 1)
		}, []int{1, 5}},
		{"file truncated to half", nil, []int{5}},
		{"file truncated to one page", nil, []int{5}},
	}
	random := rand.New(rand.NewPCG(7, 8))
	inUse := append(slices.Clone(leaves), branches...)
	for n := range 8 {
		id := inUse[random.IntN(len(inUse))]
		at := random.IntN(ps - 64)
		garbage := make([]byte, 64)
		for i := range garbage {
			garbage[i] = byte(random.Uint32())
		}
		cases = append(cases, structureDamage{fmt.Sprintf("64 random bytes at %d of %s page %d (#%d)", at, types[id], id, n),
			// The bytes may land in a page's unused tail or in the key index
			// or state, which verify does not read: any clean answer will do.
			func(d []byte) { copy(d[id*ps+at:], garbage) }, []int{0, 1, 5}})
	}
	chainName := l.entries[len(l.entries)/2].entry.Chain
	summary := map[string]int{}
	var crashes []string
	for _, c := range cases {
		path := filepath.Join(t.TempDir(), "damaged.db")
		switch c.name {
		case "file truncated to half":
			os.WriteFile(path, l.data[:len(l.data)/2], 0o600)
		case "file truncated to one page":
			os.WriteFile(path, l.data[:ps], 0o600)
		default:
			data := slices.Clone(l.data)
			c.change(data)
			os.WriteFile(path, data, 0o600)
		}
		verify := runLedgerctl(t, nil, "--db", path, "verify")
		log := runLedgerctl(t, nil, "--db", path, "log", chainName, "--limit", "100000")
		appendCopy := path + ".append"
		copyFile(t, path, appendCopy)
		appended := runLedgerctl(t, nil, "--db", appendCopy, "append", chainName, "--type", "raw/v1", "--data", "after damage")
		outcome := fmt.Sprintf("verify %d, log %d, append %d", verify.exitCode, log.exitCode, appended.exitCode)
		t.Logf("%-58s %s", c.name+":", outcome)
		summary["cases"]++
		crashed := false
		for what, r := range map[string]cliResult{"verify": verify, "log": log, "append": appended} {
			if isCrash(r) {
				crashed = true
				crashes = append(crashes, fmt.Sprintf("%s: ledgerctl %s crashed (exit %d): %s", c.name, what, r.exitCode,
					strings.ReplaceAll(firstLines(r.stderr, 1), "\n", " ")))
				continue
			}
			if r.exitCode != 0 && r.exitCode != 1 && !cleanMessage(r) {
				t.Errorf("%s: ledgerctl %s exit %d without a one-line message: %q", c.name, what, r.exitCode, r.stderr)
			}
		}
		if crashed {
			summary["crashed"]++
			continue
		}
		if !slices.Contains(c.verifyExits, verify.exitCode) {
			t.Errorf("%s: ledgerctl verify exit %d, want one of %v; stderr %q", c.name, verify.exitCode, c.verifyExits, verify.stderr)
		}
		if log.exitCode != 0 && log.exitCode != 5 {
			t.Errorf("%s: ledgerctl log exit %d, want 0 (chain readable) or 5; stderr %q", c.name, log.exitCode, log.stderr)
		}
		if appended.exitCode != 0 && appended.exitCode != 5 {
			t.Errorf("%s: ledgerctl append exit %d, want 0 or 5; stderr %q", c.name, appended.exitCode, appended.stderr)
		}
		summary[fmt.Sprintf("verify exit %d", verify.exitCode)]++
	}
	t.Logf("structure damage: %v", summary)
	for _, c := range crashes {
		t.Error(c)
	}
}

// zeroPage returns a change that zeroes page id.
func zeroPage(id, pageSize int) func([]byte) {
	return func(d []byte) { clear(d[id*pageSize : (id+1)*pageSize]) }
}

// count returns the element count in page id's header.
func count(data []byte, id, pageSize int) uint16 {
	return binary.LittleEndian.Uint16(data[id*pageSize+10:])
}

// resealMeta recomputes a meta page's checksum (FNV-64a over the meta's
// fields before the checksum), so that a changed field is believed.
func resealMeta(page []byte) {
	meta := page[pageHeaderSize : metaTxidOffset+8]
	h := uint64(14695981039346656037)
	for _, b := range meta {
		h ^= uint64(b)
		h *= 1099511628211
	}
	binary.LittleEndian.PutUint64(page[metaTxidOffset+8:], h)
}

// isCrash reports whether a ledgerctl run panicked or died of a signal
// instead of reporting an error.
func isCrash(r cliResult) bool {
	for _, sign := range []string{"panic:", "goroutine ", "fatal error:", "SIGSEGV", "SIGBUS", "unexpected fault address"} {
		if strings.Contains(r.stderr, sign) {
			return true
		}
	}
	return r.exitCode < 0
}

// cleanMessage reports whether stderr is one line starting "ledgerctl: ".
func cleanMessage(r cliResult) bool {
	return strings.HasPrefix(r.stderr, "ledgerctl: ") && strings.Count(r.stderr, "\n") == 1
}

// TestTamperDamagedPageIsAnErrorInProcess: an embedding program that opens
// a file with a damaged page gets errors matching chain.ErrCorrupt from
// Open, Verify and reads, never a panic (which would take the whole
// service down).
func TestTamperDamagedPageIsAnErrorInProcess(t *testing.T) {
	t.Parallel()
	l := buildTamperLedger(t)
	types := l.pageTypes(t)
	entryLeaf := headerPage(types, l.entries[len(l.entries)/2].offset/l.pageSize)
	if types[entryLeaf] != "leaf" {
		t.Fatalf("page %d is %s, want a leaf", entryLeaf, types[entryLeaf])
	}
	path := filepath.Join(t.TempDir(), "damaged.db")
	data := slices.Clone(l.data)
	binary.LittleEndian.PutUint16(data[entryLeaf*l.pageSize+8:], 0x4000) // flags: no known page type
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	damaged := l.entries[len(l.entries)/2].entry
	var panics []string
	call := func(what string, fn func() error) {
		defer func() {
			if p := recover(); p != nil {
				panics = append(panics, fmt.Sprintf("%s panicked: %v", what, p))
			}
		}()
		if err := fn(); err != nil && !errors.Is(err, chain.ErrCorrupt) {
			t.Errorf("%s: %v; want an error matching chain.ErrCorrupt", what, err)
		}
	}
	db, err := chain.Open(path, chain.Options{ReadOnly: true})
	if err != nil {
		if !errors.Is(err, chain.ErrCorrupt) {
			t.Fatalf("open: %v; want nil or chain.ErrCorrupt", err)
		}
		return
	}
	defer db.Close()
	call("Verify", func() error {
		report, err := db.Verify(context.Background(), chain.VerifyOptions{})
		if err == nil && report.OK() {
			return fmt.Errorf("damaged page %d verified as intact", entryLeaf)
		}
		return err
	})
	call("Get", func() error { _, err := db.Get(context.Background(), damaged.Chain, damaged.Seq); return err })
	for _, p := range panics {
		t.Errorf("a damaged page must be chain.ErrCorrupt, not a panic: %s", p)
	}
}

// TestTamperNewestMetaPageLosesOnlyTheLastTransaction: bbolt keeps two meta
// pages and falls back to the older one when the newer is damaged, which
// silently rolls the file back by one transaction. The rolled-back file is
// self-consistent, so verify alone passes; verify --expect-head with the
// heads saved before (ledgerctl head) reports it.
func TestTamperNewestMetaPageLosesOnlyTheLastTransaction(t *testing.T) {
	t.Parallel()
	l := buildTamperLedger(t)
	newer := 0
	if binary.LittleEndian.Uint64(l.data[l.pageSize+metaTxidOffset:]) > binary.LittleEndian.Uint64(l.data[metaTxidOffset:]) {
		newer = 1
	}
	var saved []string
	for _, c := range l.chains {
		r := runLedgerctl(t, nil, "--db", l.path, "head", c)
		if r.exitCode != 0 {
			t.Fatalf("ledgerctl head %s: exit %d %s", c, r.exitCode, r.stderr)
		}
		saved = append(saved, "--expect-head", strings.TrimSpace(r.stdout))
	}
	path := l.damagedCopy(t, "meta.db", zeroPage(newer, l.pageSize))
	plain := runLedgerctl(t, nil, "--db", path, "verify")
	if plain.exitCode != 0 {
		t.Errorf("verify of the rolled-back file: exit %d %s; want 0 (it is self-consistent)", plain.exitCode, plain.stderr)
	}
	expected := runLedgerctl(t, nil, append([]string{"--db", path, "-o", "json", "verify"}, saved...)...)
	if expected.exitCode != 1 || !strings.Contains(expected.stdout, `"head_mismatch"`) {
		t.Errorf("verify --expect-head of the rolled-back file: exit %d, stdout %q; want exit 1 with head mismatches",
			expected.exitCode, firstLines(expected.stdout, 3))
	}
	entries := map[string]uint64{}
	db, err := chain.Open(path, chain.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for h, err := range db.Chains(context.Background(), "") {
		if err != nil {
			t.Fatal(err)
		}
		entries[h.Chain] = h.Seq
	}
	lost := 0
	for _, c := range l.chains {
		lost += int(l.heads[c].Seq - entries[c])
	}
	if lost == 0 || lost > tamperEntriesPerUpdate {
		t.Errorf("the rolled-back file lacks %d entries; want the last transaction's, 1 to %d", lost, tamperEntriesPerUpdate)
	}
	t.Logf("newest meta page (%d) zeroed: %d entries of the last transaction gone; verify exit %d, with saved heads exit %d",
		newer, lost, plain.exitCode, expected.exitCode)
}
