// Package valuations values inventory by moving average or FIFO, per tenant,
// item and location, on top of the chain engine: every operation writes one
// quantity entry and one value entry, keyed by its operation id, atomically
// and exactly once.
//
// # Basics
//
// An item is defined once per tenant with DefineItem: valuation method
// (MovingAverage or FIFO), quantity scale, currency and minor unit, and
// whether negative stock is allowed. Operations then run against a location:
//
//	res, err := valuations.Receive(ctx, db, valuations.ReceiveRequest{
//		Tenant: "acme", Item: "SKU-1", Location: "WH-1", OperationID: "po-42/line-1",
//		Quantity: decimal.MustNew(10, 0), UnitCost: &cost,
//	})
//	fmt.Println(res.ValueChange()) // 100.00
//
// Receive, Issue, Adjust (landed cost or revaluation), Transfer (at the
// source's valuation) and Reverse each write the entry keyed
// "<operationId>:qty" on the location's quantity chain
// (tenant/val/item/location/qty) and the entry keyed "<operationId>:value" on
// its value chain (tenant/val/item/location/value), together with the
// location's derived state, in one transaction. A transfer and its reversal
// write both pairs, one at each location. Each function has a …Tx form that
// runs inside the caller's chain transaction, so one business event can write
// a stock movement, its valuation and its journal posting atomically.
//
// A retry with the same operation id and request returns the original
// entries (Result.Replayed) from a read transaction. The same operation id
// with a different request is a *ConflictError (errors.Is
// chain.ErrIdempotencyConflict). When only one half of an operation exists,
// as a writer without transactions could leave it, the next operation on
// that location (the retry, or any other) completes it from the request the
// half records: the existing half replays, the missing half is written, the
// state is applied. Nothing is ever duplicated.
//
// Stock value is authoritative: an entry's value change is the new rounded
// stock value minus the old one, value is exactly zero at quantity zero, and
// rounding is half to even at the currency's minor unit. The moving-average
// rate is kept at RateExtraPlaces (9) places beyond the minor unit; FIFO
// layers are consumed oldest first, round(Vl·q/Ql) or all of Vl. See
// docs/VALUATIONS.md for every formula and the worked example.
//
// Reads: GetBalance and BalanceTx (now), BalanceAt (as of a value-chain seq),
// Balances, Layers, GetItem and Items. Check rebuilds every location from its
// chains and reports differences with chain.ReasonStateMismatch; Rebuild
// writes what Check computes (after an import, which copies entries only, or
// to repair state).
//
// # Errors
//
// Input errors are *Error values matching their sentinel and chain.ErrInvalid;
// business rules (ErrInsufficientStock, ErrNegativeValue, …) have their own
// sentinels and name the offending amount. ErrUnknownItem and
// ErrUnknownOperation match chain.ErrNotFound. Code names each sentinel for
// machine-readable output. Nothing is written when an error is returned.
//
// # Caveats
//
//   - The moving-average rate is an int64 at minor unit + 9 places: with a
//     minor unit of 2 a rate can reach 92,233,720.36854775807 per quantity
//     unit; beyond, the operation fails with ErrOverflow. Exact rationals
//     would need unbounded integers (every receipt multiplies denominators).
//   - Operation ids are unique per chain: "r1" at one location and "r1" at
//     another are different operations.
//   - A reversal undoes a receipt only while its FIFO layer is untouched (for
//     moving average, while stock and value suffice), and does not undo an
//     issue that went below zero or a receipt that settled one; those need a
//     compensating operation.
//   - Two half-written operations interleaved on one location's chains cannot
//     be ordered; operations there fail with ErrIncomplete until resolved.
//   - Locking order on a shared backend (PostgreSQL, several processes on
//     one schema). In a writable transaction an operation first locks the
//     item's chain (tenant/val/item), then reads the definition; then it
//     locks the heads of the quantity and value chains of every location
//     it writes, in ascending name order (the item chain's name is a
//     prefix of theirs), before it reads a position, a FIFO layer or a
//     reversal marker, and before it completes a half-written operation.
//     A reversal reads the original's entries before the location locks
//     (they never change, though the look-up of a transfer's destination
//     half may lock that chain out of order, which the backend bounds and
//     the engine retries). DefineItem locks the item's chain before it
//     reads the current definition. So operations of one item, and a
//     change of its method, are serialized across processes.
//   - Check does not cross-check the two legs of a transfer against each
//     other; each location is rebuilt on its own.
package valuations
