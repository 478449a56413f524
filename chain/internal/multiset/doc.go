// Package multiset is the keyed multiset hash by which verify compares a
// chain's keyed entries with its key index without a lookup per key: an
// element (a key's digest and its entry's seq) maps to
// BLAKE3-keyed(k, digest || u64be(seq)) read as a 256-bit number, and a
// side is the Sum of its numbers mod 2^256 with their count. With k drawn
// for each verify (NewKey), whoever edits the file before the verify cannot
// know how an element maps, nor find changes whose numbers cancel.
//
// A Hasher sums a batch of Items, from keys (their digests computed in the
// same BLAKE3 lanes) or digests, or of an index's storage.KeyRefs, many
// elements per vector compression (internal/blake3batch).
package multiset
