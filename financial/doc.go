// Package financial keeps double-entry books on the ledger engine: a chart
// of accounts, currencies with their minor-unit exponent, and one
// hash-linked journal of balanced postings per book, with balances derived
// in the same transaction as the entries.
//
// # Basics
//
// A Book is one tenant's book. Everything it records is an entry of one
// chain, tenant/fin/book/journal: account and currency definitions, the
// closing of accounts, postings and reversals. The journal is therefore
// totally ordered and hash-linked, and nothing is ever edited in place.
//
//	b, err := financial.NewBook(db, "acme", "main")
//	_, err = b.AddCurrency(ctx, financial.Currency{Code: "EUR", Exponent: 2})
//	_, err = b.AddAccount(ctx, financial.Account{Code: "1400", Name: "Inventory", Type: financial.Asset})
//	_, err = b.AddAccount(ctx, financial.Account{Code: "2100", Name: "Goods received", Type: financial.Liability})
//	res, err := b.Post(ctx, financial.Posting{
//		Key: "grn-42", Date: financial.MustParseDate("2026-11-02"), Memo: "goods received",
//		Lines: []financial.Line{
//			{Account: "1400", Side: financial.Debit, Amount: decimal.MustNew(125000, 2), Currency: "EUR"},
//			{Account: "2100", Side: financial.Credit, Amount: decimal.MustNew(125000, 2), Currency: "EUR"},
//		}})
//
// A posting has two to LinesMax lines, each a positive amount on one side
// of one account in one currency, at exactly the currency's exponent. Its
// debits equal its credits in every currency, to the minor unit. Its
// accounts and currencies are defined in the same book and its accounts are
// open. Anything else is refused with an *Error that matches a sentinel of
// errors.go and chain.ErrInvalid, names the offending value, and writes
// nothing.
//
// Post with a key the journal already holds returns the original posting
// (Replayed) if the request is the same, and a *chain.ConflictError if it
// is not. Reverse appends the opposite posting, referencing the original
// by seq, at most once (its key is derived from the original's seq).
//
// Every operation has a …Tx form that runs in a caller's chain.Tx, so that
// one business event (a stock receipt, its valuation and its journal
// posting) is written atomically: PostTx, ReverseTx, AddAccountTx and so on.
// The forms without Tx run their own transaction.
//
// Balances are kept per account and currency as debits minus credits:
// the current balance (BalanceTx, one read), the balance after a journal
// seq (BalanceAtSeqTx, one seek) and the balance as of an effective date
// (BalanceAtDateTx, at most treeLevels short scans; see balance.go for
// what "as of" means with back-dated postings). TrialBalanceTx totals every
// balance per currency; the totals of debit and credit balances are equal.
// Check (or Book.Check) rebuilds all of it from the journals and reports
// every difference as a chain.Failure with chain.ReasonStateMismatch;
// Rebuild (or Book.Rebuild) writes what Check computes, one transaction per
// book (after an import, which copies entries only, or to repair state).
//
// # Caveats
//
//   - Definitions are final. An account's name, type and normal side and a
//     currency's exponent cannot change, and a closed account cannot be
//     reopened: define a new account instead. Redefining a code differently
//     is an idempotency conflict.
//   - A closed account refuses reversals too. Reverse before closing.
//   - A reversal cannot be reversed (ErrNotReversible): post the original
//     again under a new key.
//   - Retries are answered before the rules are checked: a posting accepted
//     yesterday is replayed today even if its account has since been
//     closed. A request that is malformed on its own (unbalanced, a
//     negative amount) is refused whatever its key.
//   - Effective dates lie within DateMin..DateMax (1900-01-01 to
//     2258-11-11). A balance by date can leave the int64 range although
//     every current balance is inside it; such a query returns ErrOverflow.
//   - Each posting line writes six state keys (balance, seq index, day
//     index, three date totals), which is what makes every balance read
//     O(log n); batched postings reach roughly a sixth of raw append
//     throughput on one disk (see the benchmarks).
//   - Locking order on a shared backend (PostgreSQL, several processes on
//     one book). Every write of a book (postings, reversals, definitions,
//     closings) begins by looking its idempotency key up in the journal;
//     in a writable transaction that look-up locks the journal's head (in
//     the same round trip) before any account, currency or balance is
//     read, and every write of the book goes to that one chain. So the
//     writes of one book are serialized across processes, and each reads
//     the balances and account states the previous one committed: a
//     posting after a closing is refused, a balance is never computed
//     from a stale value.
//   - Check reads one book in one read transaction and holds maps of its
//     accounts, currencies and balances, never of its postings.
package financial
