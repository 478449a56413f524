package vectors

import (
	"fmt"
	"slices"
	"strings"

	"github.com/ledgerworks/ledger/chain"
)

// ExportCase is one file under testdata/vectors/export: an export (its
// lines, each followed by a newline in the export itself), heads saved
// beforehand, and the failures a verifier must report, in chain and seq
// order.
type ExportCase struct {
	Name             string        `json:"name"`
	Description      string        `json:"description"`
	Lines            []string      `json:"lines"`
	ExpectHeads      []HeadJSON    `json:"expect_heads"`
	ExpectedFailures []FailureJSON `json:"expected_failures"`
}

// HeadJSON is a saved head: the chain must hold an entry at seq with hash.
type HeadJSON struct {
	Chain string `json:"chain"`
	Seq   uint64 `json:"seq"`
	Hash  string `json:"hash"`
}

// FailureJSON is one failure a verifier must report.
type FailureJSON struct {
	Chain  string `json:"chain"`
	Seq    uint64 `json:"seq"`
	Reason string `json:"reason"`
}

// Chains of the base export.
const (
	chainBook  = "acme/fin/book-1"
	chainStock = "acme/stock/SKU-1"
)

// buildChain makes n linked entries with deterministic times and payloads.
func buildChain(id string, n int, typ string, key func(i int) string, payload func(i int) string) []chain.Entry {
	entries := make([]chain.Entry, n)
	prev := chain.Genesis(id)
	for i := range entries {
		e := chain.Entry{Chain: id, Seq: uint64(i + 1), PrevHash: prev,
			TimeUnixNano: 1_764_000_000_000_000_000 + int64(i)*1_000_000_000, IdempotencyKey: key(i), Type: typ,
			Payload: []byte(payload(i))}
		e.Hash = e.ComputeHash()
		entries[i], prev = e, e.Hash
	}
	return entries
}

func baseChains() (book, stock []chain.Entry) {
	book = buildChain(chainBook, 4, "fin.posting/v1",
		func(i int) string {
			if i == 1 {
				return ""
			}
			return fmt.Sprintf("posting-%d", i+1)
		},
		func(i int) string {
			return fmt.Sprintf(`{"lines":[{"account":"1200","debit":"%d.00"},{"account":"3000","credit":"%d.00"}]}`, 100*(i+1), 100*(i+1))
		})
	stock = buildChain(chainStock, 3, "stock.movement/v1",
		func(i int) string { return fmt.Sprintf("receipt-%d", i+1) },
		func(i int) string { return fmt.Sprintf(`{"qty":"%d","location":"WH-1 ünï"}`, 10*(i+1)) })
	return book, stock
}

func line(e chain.Entry) string {
	return strings.TrimSuffix(string(chain.AppendExportLine(nil, &e)), "\n")
}

func lines(entries ...[]chain.Entry) []string {
	var out []string
	for _, chainEntries := range entries {
		for _, e := range chainEntries {
			out = append(out, line(e))
		}
	}
	return out
}

// relink recomputes the hashes of entries from index i on, as a forger
// would, linking each to the one before.
func relink(entries []chain.Entry, i int) []chain.Entry {
	entries = slices.Clone(entries)
	for ; i < len(entries); i++ {
		if i > 0 {
			entries[i].PrevHash = entries[i-1].Hash
		}
		entries[i].Hash = entries[i].ComputeHash()
	}
	return entries
}

func head(e chain.Entry) HeadJSON { return HeadJSON{e.Chain, e.Seq, e.Hash.String()} }

func failure(chainID string, seq uint64, reason chain.Reason) FailureJSON {
	return FailureJSON{chainID, seq, string(reason)}
}

func exportCases() []ExportCase {
	book, stock := baseChains()
	valid := lines(book, stock)
	c := func(name, description string, lines []string, heads []HeadJSON, failures ...FailureJSON) ExportCase {
		if heads == nil {
			heads = []HeadJSON{}
		}
		if failures == nil {
			failures = []FailureJSON{}
		}
		return ExportCase{name, description, lines, heads, failures}
	}
	with := func(edit func(l []string) []string) []string { return edit(slices.Clone(valid)) }

	bitFlip := slices.Clone(book)
	bitFlip[1].Payload = slices.Clone(bitFlip[1].Payload)
	bitFlip[1].Payload[5] ^= 0x01

	hashDigit := slices.Clone(book)
	hashDigit[2].Hash[0] ^= 0x10

	brokenLink := slices.Clone(book)
	brokenLink[2].PrevHash[31] ^= 0x01
	brokenLink[2].Hash = brokenLink[2].ComputeHash()

	wrongGenesis := slices.Clone(book)
	wrongGenesis[0].PrevHash = chain.Hash{}
	wrongGenesis[0].Hash = wrongGenesis[0].ComputeHash()

	rewritten := slices.Clone(stock)
	for i := 1; i < len(rewritten); i++ {
		rewritten[i].Payload = []byte(`{"qty":"1","location":"WH-9"}`)
	}
	rewritten = relink(rewritten, 1)

	moved := stock[1]
	moved.Chain, moved.Seq = chainBook, 5

	truncated := with(func(l []string) []string {
		last := l[len(l)-1]
		l[len(l)-1] = last[:len(last)/2]
		return l
	})
	otherHead := head(book[1])
	otherHead.Hash = book[0].Hash.String()

	return []ExportCase{
		c("valid", "Two chains exported in full: verifies.", valid, nil),
		c("valid-with-saved-heads", "Saved heads at the end and in the middle of chains all match.", valid,
			[]HeadJSON{head(book[3]), head(book[1]), head(stock[2])}),
		c("bit-flip", "One bit of the payload of "+chainBook+" seq 2 flipped: its hash no longer matches.",
			lines(bitFlip, stock), nil, failure(chainBook, 2, chain.ReasonHashMismatch)),
		c("hash-digit-changed", "A hex digit of the stored hash of seq 3 changed: seq 3 does not hash to it and seq 4 does not link to it.",
			lines(hashDigit, stock), nil, failure(chainBook, 3, chain.ReasonHashMismatch), failure(chainBook, 4, chain.ReasonBrokenLink)),
		c("broken-link", "The prev_hash of seq 3 changed and its hash recomputed: seq 3 does not link to seq 2, and seq 4 does not link to the new seq 3.",
			lines(brokenLink, stock), nil, failure(chainBook, 3, chain.ReasonBrokenLink), failure(chainBook, 4, chain.ReasonBrokenLink)),
		c("wrong-genesis", "Seq 1 links to 32 zero bytes instead of the chain's genesis, with its hash recomputed.",
			lines(wrongGenesis, stock), nil, failure(chainBook, 1, chain.ReasonBrokenLink), failure(chainBook, 2, chain.ReasonBrokenLink)),
		c("missing-entry", "The line of seq 2 removed.",
			with(func(l []string) []string { return slices.Delete(l, 1, 2) }), nil, failure(chainBook, 2, chain.ReasonSeqGap)),
		c("missing-first-entry", "The line of seq 1 removed: the export of the chain starts at seq 2.",
			with(func(l []string) []string { return slices.Delete(l, 0, 1) }), nil, failure(chainBook, 1, chain.ReasonSeqGap)),
		c("reordered", "The lines of seq 2 and 3 swapped: seq 2 is missing where seq 3 appears, and comes after seq 3.",
			with(func(l []string) []string { l[1], l[2] = l[2], l[1]; return l }), nil,
			failure(chainBook, 2, chain.ReasonSeqGap), failure(chainBook, 2, chain.ReasonSeqGap)),
		c("duplicate-entry", "The line of seq 2 repeated.",
			with(func(l []string) []string { return slices.Insert(l, 2, l[1]) }), nil, failure(chainBook, 2, chain.ReasonSeqGap)),
		c("non-contiguous", "The lines of "+chainBook+" resume after those of "+chainStock+".",
			append(append(lines(book[:2], stock), line(book[2])), line(book[3])), nil, failure(chainBook, 3, chain.ReasonSeqGap)),
		c("moved-to-another-chain", "The entry "+chainStock+" seq 2 relabeled as "+chainBook+" seq 5: the chain id and seq are hashed.",
			append(lines(book), append([]string{line(moved)}, lines(stock)...)...), nil,
			failure(chainBook, 5, chain.ReasonHashMismatch), failure(chainBook, 5, chain.ReasonBrokenLink)),
		c("truncated", "The export cut off in the middle of its last line: that line is undecodable and ends the check.",
			truncated, nil, failure(chainStock, 3, chain.ReasonUndecodable)),
		c("non-canonical-line", "The line of seq 2 with a space after a colon: lines must be spelled exactly as the format says.",
			with(func(l []string) []string { l[1] = strings.Replace(l[1], `"seq":`, `"seq": `, 1); return l }), nil,
			failure(chainBook, 2, chain.ReasonUndecodable)),
		c("crlf-line", "The line of seq 2 ends with CR LF: lines end with LF alone, so that line is undecodable and ends the check.",
			with(func(l []string) []string { l[1] += "\r"; return l }), nil,
			failure(chainBook, 2, chain.ReasonUndecodable)),
		c("trailing-empty-lines", "Two empty lines after the last entry: ignored, the export verifies.",
			append(slices.Clone(valid), "", ""), nil),
		c("empty-line-between-entries", "An empty line between seq 1 and seq 2: undecodable, and it ends the check.",
			with(func(l []string) []string { return slices.Insert(l, 1, "") }), nil,
			failure(chainBook, 2, chain.ReasonUndecodable)),
		c("dropped-last-entry", "The newest entry of "+chainStock+" removed: the export is consistent, only the saved head tells.",
			lines(book, stock[:2]), []HeadJSON{head(stock[2])}, failure(chainStock, 3, chain.ReasonHeadMismatch)),
		c("rewritten-chain", "Seq 2 and 3 of "+chainStock+" rewritten with hashes and links recomputed: only the saved head at seq 3 tells; the one at seq 1 still holds.",
			lines(book, rewritten), []HeadJSON{head(stock[0]), head(stock[2])}, failure(chainStock, 3, chain.ReasonHeadMismatch)),
		c("rewritten-chain-without-saved-head", "The rewritten chain of rewritten-chain verifies when no head was saved: a forger who rewrites a whole chain end can only be caught against a head kept elsewhere.",
			lines(book, rewritten), nil),
		c("saved-head-differs", "A saved head names seq 2 with another hash.",
			valid, []HeadJSON{otherHead}, failure(chainBook, 2, chain.ReasonHeadMismatch)),
		c("saved-head-of-missing-chain", "A saved head names a chain the export does not hold.",
			valid, []HeadJSON{{"acme/fin/book-2", 1, book[0].Hash.String()}}, failure("acme/fin/book-2", 1, chain.ReasonHeadMismatch)),
		c("saved-heads-at-seq-0", "Saved heads at seq 0, taken before a chain had entries, hold when they are the chain's genesis, "+
			"whether the chain has entries now or not; the one of "+chainStock+" is not its genesis.",
			valid, []HeadJSON{
				{chainBook, 0, chain.Genesis(chainBook).String()},
				{"acme/fin/book-9", 0, chain.Genesis("acme/fin/book-9").String()},
				{chainStock, 0, chain.Genesis(chainBook).String()},
			}, failure(chainStock, 0, chain.ReasonHeadMismatch)),
	}
}
