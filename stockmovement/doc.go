// Package stockmovement is an exact, idempotent stock ledger on the chain
// engine: every quantity change of an item at a location, recorded exactly
// once and never edited, with balances that are one read away.
//
// # Basics
//
// Items and locations belong to a tenant and are defined through entries of
// the tenant's catalog chain, tenant/stock/catalog (types stock.item/v1 and
// stock.location/v1). A definition is never edited: a change (a new name, a
// new negative-stock policy) is a new entry, and the current definition is
// kept in derived state. An item declares the scale of its quantities (0 for
// pieces, 3 for kilograms to the gram), fixed for its lifetime.
//
//	stockmovement.DefineItem(ctx, db, "acme", stockmovement.Item{ID: "SKU-1", Scale: 3})
//	stockmovement.DefineLocation(ctx, db, "acme", stockmovement.Location{ID: "WH-1"})
//	res, err := stockmovement.Receive(ctx, db, stockmovement.ReceiveRequest{
//		Tenant: "acme", Item: "SKU-1", Location: "WH-1",
//		Quantity: decimal.MustNew(12_500, 3), // 12.500
//		Reference: "GRN-42", IdempotencyKey: "grn-42-line-1",
//	})
//
// The movements of one item at one location form the chain
// tenant/stock/item/location, built with chain.ScopedName: ids may not
// contain "/", so no two tenants, items or locations share a chain. Each
// entry has type stock.movement/v1 and stores the signed change and the
// running quantity after it. Movements are receipts (+), issues (-),
// adjustments (±, with a reason), transfers (an out entry at the source under
// key+":out" and an in entry at the target under key+":in", written in one
// transaction) and reversals (the opposite of an earlier entry, referencing
// it by chain and seq; reversing either half of a transfer reverses both).
//
// Every operation has two forms: Op(ctx, db, request) runs its own
// transaction, OpTx(tx, request) runs inside a caller's chain.DB.Update, so
// one business event can record a stock movement, valuation entries and a
// journal posting atomically. Derived state (definitions, balances, item
// totals, reversal markers) is written in the same transaction as its
// entries; Check rebuilds it from the chains and reports differences as
// chain.ReasonStateMismatch, and Rebuild writes what Check computes (after
// an import, which copies entries only, or to repair state).
//
// Reads: GetBalance is one state read (O(1)); BalanceAtSeq reads the running
// quantity of one entry; BalanceAtTime binary-searches the chain by entry time
// (O(log n) reads); ItemTotal is one state read; History streams a chain.
//
// # Idempotency
//
// Every movement needs an idempotency key. A retry with the same key and the
// same request returns the original entries with Result.Replayed set and
// writes nothing, also inside a caller's transaction that already recorded
// it; the same key with a different request is a *chain.ConflictError
// (chain.ErrIdempotencyConflict). Because the payload holds the running
// quantity, which depends on the ledger, replays are decided on the request
// bytes of the payload (everything but the running quantity), before the
// engine sees the append. Op(ctx, db, …) first runs in a read transaction,
// so a retry or a conflict costs no write transaction and no fsync.
//
// # Rules
//
// Quantities are decimal.Decimal values at exactly the item's scale
// (ErrScaleMismatch), non-zero (ErrZeroQuantity), positive for receipts,
// issues and transfers (ErrNegativeQuantity); a balance or item total that
// would not fit int64 units is ErrOverflow. A movement that lowers a balance
// below zero is refused with an *InsufficientStockError (ErrNegativeStock)
// naming the shortfall, unless the item allows negative stock. Every input
// error also matches chain.ErrInvalid, every missing item, location or
// movement chain.ErrNotFound; nothing is written when an error is returned.
//
// # Caveats
//
//   - A key is unique per chain, as in the engine: the same key on another
//     item or location is another operation. Transfer halves use key+":out"
//     and key+":in", so a receipt keyed "x:in" and a transfer keyed "x" into
//     the same chain conflict.
//   - The scale of an item cannot change, and nothing is ever deleted: items
//     and locations stay defined.
//   - Reversals are checked like any movement: reversing a receipt whose
//     stock was issued since is refused when it would go negative.
//   - A reversal cannot be reversed; record a new movement instead.
//   - The negative-stock policy applies when a movement is recorded. Changing
//     it later does not revisit old entries, and Check does not judge signs.
//   - Locking order on a shared backend (PostgreSQL, several processes on
//     one schema). A movement locks, in a writable transaction and before
//     it reads any balance, marker or total, the heads of the item's lock
//     chain (ItemLockChain, tenant/stock/item, which never holds entries
//     and guards the item total shared by its locations) and of the
//     movement chains it writes, in ascending name order; only then does
//     it look keys up and read state. A reversal of a transfer locks both
//     halves' chains, in order, before it looks the counterpart up. A
//     definition locks the catalog chain before it reads the current
//     definition. So two processes issuing from one stock, or defining one
//     item, are serialized, and each computes from what the other
//     committed. The price is that movements of one item at different
//     locations wait for each other on PostgreSQL (the item total is one
//     value), and the item's lock costs a placeholder row per transaction.
//     Definitions are read without a lock: a movement concurrent with a
//     policy change applies either policy.
//   - Check compares the state of every item it reads in one read
//     transaction per item; the catalog and the stray-state scan are separate
//     snapshots, so run it on a quiet ledger for an exact answer. Chains of
//     an item the tenant never defined were not written by this package and
//     are not judged (state kept for such an item is reported).
package stockmovement
