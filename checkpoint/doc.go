// Package checkpoint is the ledger checkpoint: one root that commits to
// every chain's Merkle tree (its size and root) at one moment, written as a
// C2SP signed note (c2sp.org/tlog-checkpoint, c2sp.org/signed-note) with an
// Ed25519 key.
//
// # Basics
//
// A checkpoint's tree has one leaf per chain, in byte order of the chain
// ids; the leaf of a chain whose tree has size s and root r is
//
//	SHA-256(0x00 || "ledger/checkpoint/v1" || 0x00 || lp(chain) || u64be(s) || r)
//
// and the tree over them is RFC 9162's (package merkle). The note's text is
//
//	<origin>
//	<number of chains, decimal>
//	<root, standard base64>
//
// signed by a key whose name is the origin. Open checks the signature and
// the origin and parses the text; Parse only parses.
//
// # Caveats
//
// A checkpoint says nothing of chains it does not list (created after it),
// nor of entries past each chain's size. Its size is a number of chains,
// not of entries: the tree of leaves is not append-only (a new chain can
// sort before old ones), so two checkpoints are compared chain by chain
// (see package audit), not by a consistency proof of this tree.
package checkpoint
