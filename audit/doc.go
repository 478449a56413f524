// Package audit makes and checks what an auditor receives: signed ledger
// checkpoints (package checkpoint), proofs that an entry is in a
// checkpoint, and proofs that a later checkpoint extends an earlier one.
//
// # Basics
//
// CreateCheckpoint reads every chain's tree head from one snapshot, signs
// the checkpoint of them and records the heads in the ledger under its
// root. ProveEntry and ProveConsistency answer from those records and the
// chains' trees. VerifyEntryProof and VerifyConsistencyProof need only the
// proof file and the verifier key: no ledger. VerifyLedger checks that a
// ledger extends a checkpoint. A Publisher signs a checkpoint every
// Interval.
//
// # Caveats
//
// Verify* return only an error; each refusal is a typed error or wraps a
// sentinel of this package, package checkpoint or package merkle, and
// mismatches carry the expected and the calculated values. A checkpoint
// commits to the chains it lists, up to their sizes: a chain created after
// it, and entries appended after it, are not covered until the next one.
package audit
