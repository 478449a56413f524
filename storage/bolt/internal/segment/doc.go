// Package segment is the layout of the entry_segments bucket's values: a
// run of one chain's consecutive entries, stored under the chain's id and
// the seq of its last entry (Key), decoded and checked against its key by
// Decode and built by a Builder up to BytesMax. An Index is a read
// transaction's map of one chain's segments, so that a read by seq is a
// search in memory instead of a descent of the B-tree.
//
// The package knows the bytes of a segment and how to find one; the
// backend owns the bucket, the transactions and the errors that name a
// file.
package segment
