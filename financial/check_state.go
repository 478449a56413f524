package financial

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"sort"
)

// Sizes of the binary suffixes of index keys.
const (
	seqSuffixSize = 8
	daySuffixSize = 4 + 8
	sumSuffixSize = 1 + 4
)

// treeCheck rebuilds the date-range totals of one account and currency as
// the state scan passes its day index entries in date order.
type treeCheck struct {
	account, currency string
	pair              *pairCheck
	levels            [treeLevels]struct {
		node  uint32
		total sumNode
		open  bool
	}
}

// scanState passes over every state key of the book once, in key order,
// comparing each with the rebuilt state; then reports what the journal
// implies but the scan did not find.
func (c *checker) scanState() error {
	prefix := []byte(c.b.prefix)
	tree := &treeCheck{}
	for kv, err := range c.tx.StateScan(prefix, prefixEnd(prefix), false) {
		if err != nil {
			return err
		}
		rest := kv.Key[len(prefix):]
		slash := bytes.IndexByte(rest, '/')
		if slash < 0 {
			c.fail(0, "unknown state key %q", rest)
			continue
		}
		section, body := string(rest[:slash+1]), rest[slash+1:]
		var err error
		switch section {
		case sectionAccount:
			err = c.stateAccount(string(body), kv.Value)
		case sectionCurrency:
			err = c.stateCurrency(string(body), kv.Value)
		case sectionBalance:
			c.stateBalance(string(body), kv.Value)
		case sectionSeq:
			if p := c.indexPair(section, body, seqSuffixSize); p != nil {
				p.seqKeys++
			}
		case sectionDay:
			err = c.stateDay(tree, body, kv.Value)
		case sectionSum:
			if p := c.indexPair(section, body, sumSuffixSize); p != nil {
				p.sums++
			}
		default:
			c.fail(0, "unknown state key %q", rest)
		}
		if err != nil {
			return err
		}
	}
	if err := c.flushTree(tree); err != nil {
		return err
	}
	c.reportMissing()
	return nil
}

func (c *checker) stateAccount(code string, value []byte) error {
	c.seen[sectionAccount+code] = true
	a := c.accounts[code]
	if a == nil {
		c.fail(0, "state holds account %s, which the journal does not define", code)
		return nil
	}
	if want := encodeAccountState(a); !bytes.Equal(value, want) {
		c.fail(a.DefinedSeq, "state of account %s is %x, rebuilt %x", code, value, want)
	}
	return nil
}

func (c *checker) stateCurrency(code string, value []byte) error {
	c.seen[sectionCurrency+code] = true
	cur := c.currencies[code]
	if cur == nil {
		c.fail(0, "state holds currency %s, which the journal does not define", code)
		return nil
	}
	if want := encodeCurrencyState(cur); !bytes.Equal(value, want) {
		c.fail(cur.DefinedSeq, "state of currency %s is %x, rebuilt %x", code, value, want)
	}
	return nil
}

func (c *checker) stateBalance(pairName string, value []byte) {
	account, currency, ok := splitPair(pairName)
	if !ok {
		c.fail(0, "unknown balance key %q", pairName)
		return
	}
	p := c.pair(account, currency)
	p.balanceFound = true
	if p.state.postings == 0 {
		c.fail(0, "state holds a balance of %s in %s, which has no postings", account, currency)
		return
	}
	if want := p.state.encode(); !bytes.Equal(value, want) {
		got, err := decodeBalanceState(value)
		detail := fmt.Sprintf("%x", value)
		if err == nil {
			detail = fmt.Sprintf("%d minor units over %d postings to seq %d", got.balance, got.postings, got.lastSeq)
		}
		c.fail(p.state.lastSeq, "balance of %s in %s is %s, rebuilt %d minor units over %d postings to seq %d",
			account, currency, detail, p.state.balance, p.state.postings, p.state.lastSeq)
	}
}

// indexPair returns the pair an index key belongs to, or nil (reported)
// for a malformed key.
func (c *checker) indexPair(section string, body []byte, suffixSize int) *pairCheck {
	if len(body) <= suffixSize || body[len(body)-suffixSize-1] != '/' {
		c.fail(0, "malformed %s key %q", section, body)
		return nil
	}
	account, currency, ok := splitPair(string(body[:len(body)-suffixSize-1]))
	if !ok {
		c.fail(0, "malformed %s key %q", section, body)
		return nil
	}
	return c.pair(account, currency)
}

// stateDay counts a day index entry and adds it to the rebuilt date-range
// totals; a node is compared with the stored one when the scan leaves it.
func (c *checker) stateDay(tree *treeCheck, body, value []byte) error {
	p := c.indexPair(sectionDay, body, daySuffixSize)
	if p == nil {
		return nil
	}
	p.dayKeys++
	if len(value) != 8 {
		c.fail(0, "day index value of %d bytes", len(value))
		return nil
	}
	if p != tree.pair {
		if err := c.flushTree(tree); err != nil {
			return err
		}
		account, currency, _ := splitPair(string(body[:len(body)-daySuffixSize-1]))
		*tree = treeCheck{account: account, currency: currency, pair: p}
	}
	index := binary.BigEndian.Uint32(body[len(body)-daySuffixSize:])
	if index >= dateDays {
		c.fail(0, "day index entry for day %d beyond the date range", index)
		return nil
	}
	delta := int64(binary.BigEndian.Uint64(value))
	for level := range uint8(treeLevels) {
		l := &tree.levels[level]
		if n := node(level, index); !l.open || l.node != n {
			if err := c.flushLevel(tree, level); err != nil {
				return err
			}
			l.node, l.total, l.open = n, sumNode{}, true
		}
		l.total.total = l.total.total.add(wideOf(delta))
		l.total.postings++
	}
	return nil
}

func (c *checker) flushTree(tree *treeCheck) error {
	for level := range uint8(treeLevels) {
		if err := c.flushLevel(tree, level); err != nil {
			return err
		}
	}
	return nil
}

func (c *checker) flushLevel(tree *treeCheck, level uint8) error {
	l := &tree.levels[level]
	if !l.open {
		return nil
	}
	l.open = false
	tree.pair.sumsExpected++
	key := c.b.sumKey(tree.account, tree.currency, level, l.node)
	return c.expectState(0, key, l.total.encode())
}

// reportMissing reports definitions and balances the journal implies and
// index sizes that differ from the postings.
func (c *checker) reportMissing() {
	for _, code := range sortedKeys(c.accounts) {
		if !c.seen[sectionAccount+code] {
			c.fail(c.accounts[code].DefinedSeq, "state of account %s is missing", code)
		}
	}
	for _, code := range sortedKeys(c.currencies) {
		if !c.seen[sectionCurrency+code] {
			c.fail(c.currencies[code].DefinedSeq, "state of currency %s is missing", code)
		}
	}
	for _, name := range sortedKeys(c.pairs) {
		p := c.pairs[name]
		n := p.state.postings
		if n > 0 && !p.balanceFound {
			c.fail(p.state.lastSeq, "balance of %s is missing", name)
		}
		if p.seqKeys != n {
			c.fail(p.state.lastSeq, "seq index of %s holds %d entries for %d postings", name, p.seqKeys, n)
		}
		if p.dayKeys != n {
			c.fail(p.state.lastSeq, "day index of %s holds %d entries for %d postings", name, p.dayKeys, n)
		}
		if p.sums != p.sumsExpected {
			c.fail(p.state.lastSeq, "date totals of %s hold %d nodes, the day index implies %d", name, p.sums, p.sumsExpected)
		}
	}
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// keyName shows a state key without its book prefix, with the binary
// suffix of an index key in hex.
func (c *checker) keyName(key []byte) string {
	rest := key[len(c.b.prefix):]
	suffix := 0
	switch {
	case bytes.HasPrefix(rest, []byte(sectionSeq)):
		suffix = seqSuffixSize
	case bytes.HasPrefix(rest, []byte(sectionDay)):
		suffix = daySuffixSize
	case bytes.HasPrefix(rest, []byte(sectionSum)):
		suffix = sumSuffixSize
	}
	suffix = min(suffix, len(rest))
	return fmt.Sprintf("%s%x", rest[:len(rest)-suffix], rest[len(rest)-suffix:])
}
