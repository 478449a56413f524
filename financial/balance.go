package financial

import (
	"context"
	"encoding/binary"
	"errors"
	"math"
	"math/bits"

	"github.com/ledgerworks/ledger/chain"
	"github.com/ledgerworks/ledger/decimal"
)

// Balance is the balance of one account in one currency.
type Balance struct {
	Account  string `json:"account"`
	Currency string `json:"currency"`
	// Amount is debits minus credits, at the currency's exponent.
	Amount decimal.Decimal `json:"amount"`
	// Normal is the balance on the account's normal side: Amount for a
	// debit-normal account, -Amount for a credit-normal one, so that a
	// liability of 100.00 shows as 100.00.
	Normal     decimal.Decimal `json:"normal"`
	NormalSide Side            `json:"normal_side"`
	// Postings counts the postings included.
	Postings uint64 `json:"postings"`
	// Seq is the journal seq the balance is as of: the last posting
	// included for current and by-seq balances, the journal's head when
	// read for by-date balances.
	Seq uint64 `json:"seq"`
	// Date is set for by-date balances.
	Date *Date `json:"date,omitempty"`
}

// balanceState is the current balance of an account in a currency:
// balance i64, postings u64, last seq u64.
type balanceState struct {
	balance  int64
	postings uint64
	lastSeq  uint64
}

const balanceStateSize = 24

func (s balanceState) encode() []byte {
	v := make([]byte, balanceStateSize)
	binary.BigEndian.PutUint64(v, uint64(s.balance))
	binary.BigEndian.PutUint64(v[8:], s.postings)
	binary.BigEndian.PutUint64(v[16:], s.lastSeq)
	return v
}

func decodeBalanceState(v []byte) (balanceState, error) {
	if len(v) != balanceStateSize {
		return balanceState{}, stateCorrupt("balance of %d bytes", len(v))
	}
	s := balanceState{balance: int64(binary.BigEndian.Uint64(v)), postings: binary.BigEndian.Uint64(v[8:]),
		lastSeq: binary.BigEndian.Uint64(v[16:])}
	if s.balance == math.MinInt64 {
		return balanceState{}, stateCorrupt("balance out of range")
	}
	return s, nil
}

func (b *Book) readBalance(tx *chain.Tx, account, currency string) (balanceState, error) {
	v, found, err := getState(tx, b.balanceKey(account, currency))
	if err != nil || !found {
		return balanceState{}, err
	}
	return decodeBalanceState(v)
}

// Balances by effective date.
//
// "The balance as of date D" is the sum of every posting with an effective
// date on or before D that the journal holds when the question is asked,
// whatever its seq. A posting dated in the past therefore changes the
// balance as of every date from its own onwards, as it should: a late
// invoice dated March belongs in March. (What the books said about March
// before that posting arrived is the balance by seq, BalanceAtSeq.)
//
// Because back-dated postings change many dates at once, a running balance
// per date would need rewriting on every back-dated posting. Instead each
// account and currency keeps totals over aligned ranges of days, a tree
// with fan-out 64 over the 2^17 days of the date range: level L has a node
// for every 64^L days that hold a posting, and the top level has at most
// 32 nodes. A posting adds its amount to the one node per level that covers
// its day (treeLevels writes, whatever its date), and the balance as of D
// adds at most 63 consecutive nodes per level (treeLevels short range
// scans). Both are O(log) in the date range and do not depend on the number
// of postings. Fan-out 64 rather than 16 saves two of the eight state
// writes of a line; a scan of 63 adjacent keys costs about what a scan of
// 15 does (the keys share pages).
//
// Node totals are 128-bit: a balance as of some date can exceed the int64
// range even though every current balance stays inside it (a late posting
// dated before an earlier one of the same sign); such a query returns
// ErrOverflow rather than a wrong number.
const (
	treeFanoutBits = 6
	treeFanout     = 1 << treeFanoutBits
	treeLevels     = 3 // treeFanout^(treeLevels-1) * 32 == dateDays
)

// node returns the node of level covering the day index.
func node(level uint8, index uint32) uint32 { return index >> (treeFanoutBits * uint32(level)) }

// prefixRange returns the nodes of level that BalanceAtDate adds for the
// days 0..index: those before index's own node of the level above, inside
// that node's range.
func prefixRange(level uint8, index uint32) (first, end uint32) {
	x := index + 1
	end = x >> (treeFanoutBits * uint32(level))
	first = x >> (treeFanoutBits * uint32(level+1)) << treeFanoutBits
	return first, end
}

// wide is a 128-bit two's complement integer.
type wide struct {
	hi int64
	lo uint64
}

func wideOf(v int64) wide { return wide{hi: v >> 63, lo: uint64(v)} }

func (a wide) add(b wide) wide {
	lo, carry := bits.Add64(a.lo, b.lo, 0)
	return wide{hi: a.hi + b.hi + int64(carry), lo: lo}
}

func (a wide) neg() wide { return wide{hi: ^a.hi, lo: ^a.lo}.add(wideOf(1)) }

// int64 returns the value if it lies in -MaxInt64..MaxInt64.
func (a wide) int64() (int64, bool) {
	v := int64(a.lo)
	return v, a.hi == v>>63 && v != math.MinInt64
}

// sumNode is a node value: total (128 bits) and postings counted.
type sumNode struct {
	total    wide
	postings uint64
}

const sumNodeSize = 24

func (n sumNode) encode() []byte {
	v := make([]byte, sumNodeSize)
	binary.BigEndian.PutUint64(v, uint64(n.total.hi))
	binary.BigEndian.PutUint64(v[8:], n.total.lo)
	binary.BigEndian.PutUint64(v[16:], n.postings)
	return v
}

func decodeSumNode(v []byte) (sumNode, error) {
	if len(v) != sumNodeSize {
		return sumNode{}, stateCorrupt("date total of %d bytes", len(v))
	}
	return sumNode{total: wide{hi: int64(binary.BigEndian.Uint64(v)), lo: binary.BigEndian.Uint64(v[8:])},
		postings: binary.BigEndian.Uint64(v[16:])}, nil
}

// addToTree adds one posting's net amount to the nodes covering its date.
func (b *Book) addToTree(tx *chain.Tx, account, currency string, date Date, delta int64) error {
	index := date.index()
	for level := range uint8(treeLevels) {
		key := b.sumKey(account, currency, level, node(level, index))
		var n sumNode
		v, found, err := getState(tx, key)
		if err != nil {
			return err
		}
		if found {
			if n, err = decodeSumNode(v); err != nil {
				return err
			}
		}
		n.total = n.total.add(wideOf(delta))
		n.postings++
		if err := tx.StatePut(key, n.encode()); err != nil {
			return err
		}
	}
	return nil
}

// Balance returns the current balance; see BalanceTx.
func (b *Book) Balance(ctx context.Context, account, currency string) (Balance, error) {
	return view(ctx, b, func(tx *chain.Tx) (Balance, error) { return b.BalanceTx(tx, account, currency) })
}

// BalanceTx returns the current balance of account in currency: one state
// read. Both must be defined (errors matching chain.ErrNotFound otherwise);
// an account without postings in the currency has a zero balance.
func (b *Book) BalanceTx(tx *chain.Tx, account, currency string) (Balance, error) {
	a, c, err := b.resolve(tx, account, currency)
	if err != nil {
		return Balance{}, err
	}
	s, err := b.readBalance(tx, account, currency)
	if err != nil {
		return Balance{}, err
	}
	return makeBalance(&a, &c, s.balance, s.postings, s.lastSeq), nil
}

// BalancesTx returns the current balances of an account in every currency
// it has postings in, in currency code order.
func (b *Book) BalancesTx(tx *chain.Tx, account string) ([]Balance, error) {
	a, err := b.AccountTx(tx, account)
	if err != nil {
		return nil, err
	}
	var out []Balance
	prefix := append(b.key(sectionBalance, account), '/')
	for kv, err := range tx.StateScan(prefix, prefixEnd(prefix), false) {
		if err != nil {
			return nil, err
		}
		c, err := b.CurrencyTx(tx, string(kv.Key[len(prefix):]))
		if err != nil {
			return nil, err
		}
		s, err := decodeBalanceState(kv.Value)
		if err != nil {
			return nil, err
		}
		out = append(out, makeBalance(&a, &c, s.balance, s.postings, s.lastSeq))
	}
	return out, nil
}

// Balances returns an account's balances in every currency; see BalancesTx.
func (b *Book) Balances(ctx context.Context, account string) ([]Balance, error) {
	return view(ctx, b, func(tx *chain.Tx) ([]Balance, error) { return b.BalancesTx(tx, account) })
}

// BalanceAtSeq returns the balance by journal seq; see BalanceAtSeqTx.
func (b *Book) BalanceAtSeq(ctx context.Context, account, currency string, seq uint64) (Balance, error) {
	return view(ctx, b, func(tx *chain.Tx) (Balance, error) { return b.BalanceAtSeqTx(tx, account, currency, seq) })
}

// BalanceAtSeqTx returns the balance of account in currency after the
// journal entry seq: what the books showed at that point, whatever the
// effective dates. It is one descending seek in the seq/ index.
func (b *Book) BalanceAtSeqTx(tx *chain.Tx, account, currency string, seq uint64) (Balance, error) {
	a, c, err := b.resolve(tx, account, currency)
	if err != nil {
		return Balance{}, err
	}
	prefix := b.pairPrefix(sectionSeq, account, currency)
	end := prefixEnd(prefix)
	if seq < math.MaxUint64 {
		end = b.seqKey(account, currency, seq+1)
	}
	var s balanceState
	for kv, err := range tx.StateScan(prefix, end, true) {
		if err != nil {
			return Balance{}, err
		}
		if len(kv.Key) != len(prefix)+8 {
			return Balance{}, stateCorrupt("seq index key of %d bytes", len(kv.Key))
		}
		if s, err = decodeSeqValue(kv.Value); err != nil {
			return Balance{}, err
		}
		s.lastSeq = binary.BigEndian.Uint64(kv.Key[len(prefix):])
		break
	}
	return makeBalance(&a, &c, s.balance, s.postings, s.lastSeq), nil
}

// A seq index value is the running balance i64 and the postings counted
// u64 after the posting.
const seqValueSize = 16

func encodeSeqValue(s balanceState) []byte {
	v := make([]byte, seqValueSize)
	binary.BigEndian.PutUint64(v, uint64(s.balance))
	binary.BigEndian.PutUint64(v[8:], s.postings)
	return v
}

func decodeSeqValue(v []byte) (balanceState, error) {
	if len(v) != seqValueSize {
		return balanceState{}, stateCorrupt("seq index value of %d bytes", len(v))
	}
	s := balanceState{balance: int64(binary.BigEndian.Uint64(v)), postings: binary.BigEndian.Uint64(v[8:])}
	if s.balance == math.MinInt64 {
		return balanceState{}, stateCorrupt("seq index balance out of range")
	}
	return s, nil
}

// BalanceAtDate returns the balance by effective date; see BalanceAtDateTx.
func (b *Book) BalanceAtDate(ctx context.Context, account, currency string, date Date) (Balance, error) {
	return view(ctx, b, func(tx *chain.Tx) (Balance, error) { return b.BalanceAtDateTx(tx, account, currency, date) })
}

// BalanceAtDateTx returns the balance of account in currency over every
// posting the journal holds with an effective date on or before date (see
// "Balances by effective date" above). Seq is the journal head it reflects.
func (b *Book) BalanceAtDateTx(tx *chain.Tx, account, currency string, date Date) (Balance, error) {
	if err := date.Validate(); err != nil {
		return Balance{}, err
	}
	a, c, err := b.resolve(tx, account, currency)
	if err != nil {
		return Balance{}, err
	}
	var total sumNode
	index := date.index()
	for level := range uint8(treeLevels) {
		first, end := prefixRange(level, index)
		if first == end {
			continue
		}
		for kv, err := range tx.StateScan(b.sumKey(account, currency, level, first), b.sumKey(account, currency, level, end), false) {
			if err != nil {
				return Balance{}, err
			}
			n, err := decodeSumNode(kv.Value)
			if err != nil {
				return Balance{}, err
			}
			total.total = total.total.add(n.total)
			total.postings += n.postings
		}
	}
	amount, ok := total.total.int64()
	if !ok {
		return Balance{}, &Error{Err: ErrOverflow, Class: chain.ErrInvalid, Cause: decimal.ErrOverflow,
			Detail: "balance of " + account + " in " + currency + " as of " + date.String() + " exceeds the range of minor units"}
	}
	head, err := tx.Head(b.journal)
	if err != nil && !errors.Is(err, chain.ErrNotFound) {
		return Balance{}, err
	}
	bal := makeBalance(&a, &c, amount, total.postings, head.Seq)
	bal.Date = &date
	return bal, nil
}

// resolve reads the account and currency a balance query names.
func (b *Book) resolve(tx *chain.Tx, account, currency string) (Account, Currency, error) {
	a, err := b.AccountTx(tx, account)
	if err != nil {
		return Account{}, Currency{}, err
	}
	c, err := b.CurrencyTx(tx, currency)
	if err != nil {
		return Account{}, Currency{}, err
	}
	return a, c, nil
}

// makeBalance builds a Balance; amount is never MinInt64 (every stored
// balance is checked), so its negation exists.
func makeBalance(a *Account, c *Currency, amount int64, postings, seq uint64) Balance {
	normal := amount
	if a.NormalSide == Credit {
		normal = -amount
	}
	return Balance{Account: a.Code, Currency: c.Code, Amount: decimal.MustNew(amount, c.Exponent),
		Normal: decimal.MustNew(normal, c.Exponent), NormalSide: a.NormalSide, Postings: postings, Seq: seq}
}

// TrialBalance lists every balance of the book with totals per currency.
type TrialBalance struct {
	Seq    uint64          `json:"seq"`    // the journal head it reflects
	Rows   []Balance       `json:"rows"`   // in account, then currency order
	Totals []CurrencyTotal `json:"totals"` // in currency code order
}

// CurrencyTotal sums the balances of one currency: the debit balances, the
// credit balances (as a positive amount) and their difference, which is
// zero in a ledger whose every posting balances.
type CurrencyTotal struct {
	Currency string          `json:"currency"`
	Debit    decimal.Decimal `json:"debit"`
	Credit   decimal.Decimal `json:"credit"`
	Net      decimal.Decimal `json:"net"`
}

// TrialBalance computes the trial balance; see TrialBalanceTx.
func (b *Book) TrialBalance(ctx context.Context) (TrialBalance, error) {
	return view(ctx, b, b.TrialBalanceTx)
}

// TrialBalanceTx reads every current balance of the book (one scan) and
// totals them per currency in 128 bits.
func (b *Book) TrialBalanceTx(tx *chain.Tx) (TrialBalance, error) {
	var tb TrialBalance
	head, err := tx.Head(b.journal)
	if err != nil && !errors.Is(err, chain.ErrNotFound) {
		return tb, err
	}
	tb.Seq = head.Seq
	currencies, err := b.CurrenciesTx(tx)
	if err != nil {
		return tb, err
	}
	debit, credit := make([]wide, len(currencies)), make([]wide, len(currencies))
	seen := make([]bool, len(currencies))
	prefix := b.key(sectionBalance)
	var a Account
	for kv, err := range tx.StateScan(prefix, prefixEnd(prefix), false) {
		if err != nil {
			return tb, err
		}
		account, currency, ok := splitPair(string(kv.Key[len(prefix):]))
		i := currencyIndex(currencies, currency)
		if !ok || i < 0 {
			return tb, stateCorrupt("balance key %q", kv.Key)
		}
		if a.Code != account {
			if a, err = b.AccountTx(tx, account); err != nil {
				return tb, err
			}
		}
		s, err := decodeBalanceState(kv.Value)
		if err != nil {
			return tb, err
		}
		tb.Rows = append(tb.Rows, makeBalance(&a, &currencies[i], s.balance, s.postings, s.lastSeq))
		seen[i] = true
		if s.balance > 0 {
			debit[i] = debit[i].add(wideOf(s.balance))
		} else {
			credit[i] = credit[i].add(wideOf(-s.balance))
		}
	}
	for i, c := range currencies {
		d, okDebit := debit[i].int64()
		cr, okCredit := credit[i].int64()
		net, okNet := debit[i].add(credit[i].neg()).int64()
		if !okDebit || !okCredit || !okNet {
			return tb, &Error{Err: ErrOverflow, Class: chain.ErrInvalid, Cause: decimal.ErrOverflow,
				Detail: "trial balance totals in " + c.Code + " exceed the range of minor units"}
		}
		if !seen[i] {
			continue
		}
		tb.Totals = append(tb.Totals, CurrencyTotal{Currency: c.Code, Debit: decimal.MustNew(d, c.Exponent),
			Credit: decimal.MustNew(cr, c.Exponent), Net: decimal.MustNew(net, c.Exponent)})
	}
	return tb, nil
}

func currencyIndex(currencies []Currency, code string) int {
	for i := range currencies {
		if currencies[i].Code == code {
			return i
		}
	}
	return -1
}
