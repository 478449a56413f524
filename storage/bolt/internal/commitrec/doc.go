// Package commitrec is the codec of the write-ahead log's commit records:
// one writable transaction's writes (appends, state puts and deletes) in the
// order it made them, encoded by Encode and EncodeAliased and decoded
// strictly by Decode (docs/FORMAT.md, "Commit record"). It knows nothing of
// bbolt, the log's framing (internal/wal) or the memory tables
// (the backend), which take its Operations.
package commitrec
