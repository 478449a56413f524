// Package merkle is the tree math of RFC 9162 (Certificate Transparency
// 2.0, the same tree as RFC 6962): SHA-256 leaf and node hashes with the
// 0x00 and 0x01 prefixes, the compact range that extends a tree by one leaf
// in O(log n) memory, and the inclusion and consistency proofs with their
// verification.
//
// # Basics
//
// A tree of size n has the leaves 0..n-1. Its root is HashEmpty for n = 0,
// the leaf hash for n = 1, and otherwise the node hash of the roots of the
// first k leaves and of the rest, where k is the largest power of two
// smaller than n. A node is named by its level (0 for a leaf) and its index
// among the nodes of that level: node (level, index) is the root of the
// perfect subtree over the leaves [index<<level, (index+1)<<level).
//
// Range holds the roots of the perfect subtrees that make up a tree's leaves
// (one per bit set in its size): appending a leaf merges them and reports
// every node it completes, so a store can keep the nodes that make proofs
// cheap. InclusionProof and ConsistencyProof build proofs from such stored
// nodes through a NodeReader; VerifyInclusion and VerifyConsistency check
// them against roots alone.
//
// # Caveats
//
// Verify* return only an error: nil means the proof holds. A wrong root is
// a *RootMismatchError carrying both values; a proof of the wrong length is
// ErrProofLength; arguments no proof can have are ErrIndexOutOfRange or
// ErrSizeOrder. The package hashes what it is given: what a leaf stands for
// (an entry hash, a checkpoint leaf) is the caller's encoding.
package merkle
