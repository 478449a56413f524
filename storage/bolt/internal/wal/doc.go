// Package wal is the write-ahead log in front of the bolt backend: a commit
// becomes one record appended to a preallocated file and one fdatasync,
// instead of a bbolt commit (page writes and two syncs). The backend keeps
// what the log holds in memory until a checkpoint has written it to bbolt,
// then releases the log up to there.
//
// # Basics
//
// A log is a directory of segment files, each named by the LSN (log
// sequence number) of its first record as 16 lowercase hex digits and
// ".wal" (0000000000000001.wal). A segment is created by writing its size
// in zeros and fdatasync-ing it, and enters the log by a rename and a sync
// of the directory; appends then overwrite blocks that are already
// allocated, so the file size never changes and an fdatasync flushes data
// only. Segments grow: the first of a log is SegmentSizeInitial (1 MiB, or
// SegmentSizeBytes when that is smaller) and each new one twice the
// previous, up to SegmentSizeBytes (Options; SegmentSizeDefault, 64 MiB),
// so that a log holding little never zero-fills megabytes it does not use.
// Each record is
//
//	u32be payload length | u64be LSN | u32be CRC-32C | payload | zero padding to a multiple of 8
//
// with the CRC-32C (Castagnoli) over the length, the LSN and the payload.
// The records of a segment have consecutive LSNs starting at the file's
// name; the first record of a segment continues the previous segment. The
// log ends at the first record, in the last segment, whose length is over
// RecordSizeMax or past the file's end, whose LSN is not the previous one
// plus 1 (zeros have LSN 0, never used), or whose CRC fails: a record being
// written when the process or the machine stopped was never acknowledged,
// and the next Append overwrites it. The same in a segment that is not the
// last, a gap between segments or an unreadable file is damage: Open returns
// an error wrapping storage.ErrCorrupt that names the file and the offset.
//
// Append(lsn, payload) writes the record with one pwritev and one
// fdatasync. LSNs are given by the caller, who continues the numbering it
// persisted elsewhere: LastLSN()+1, or any LSN from 1 when the log is empty.
// A record that does not fit in what is left of the segment starts a new
// one; a record larger than a segment gets a segment of its own, exactly as
// large as it needs. Rotate makes the next Append start a new segment.
// AppendNoSync queues the record for the segment without a system call,
// and Sync(lsn) makes every record up to lsn durable: its first caller
// writes everything queued so far with one pwritev and fdatasyncs it, and
// a caller that sync already covered returns without a system call (a
// group sync), so a writer can queue its next record while the previous
// one is being synced. A record queued for a segment is written and synced
// before the next segment takes a record. The payload of a queued record
// must not change until a Sync covered it. DurableLSN is the last record
// known durable. Append is AppendNoSync followed by Sync. A failed write
// or fdatasync poisons the log and overwrites the records it did not make
// durable with zeros, best effort, so that a reopen ends at the durable
// prefix. The
// first append after a writable Open zeroes whatever is not zero behind
// the end of the log too: records written before an earlier one was synced
// can reach the disk out of order, and a kept later record must not
// continue the log again once that append has rewritten the place of a
// lost earlier one. Open itself changes no segment, so a caller that gives
// up after opening leaves the log as it was.
// Release(lsn) removes the segments that hold only records up to lsn (never
// the one being appended to, nor the last one holding a record, so LastLSN
// survives a reopen); Records(afterLSN) reads the records after an
// LSN back from disk, one at a time, to rebuild the caller's memory at
// start. After a clean shutdown (everything released, Close), Remove deletes
// the directory.
//
// A rotation costs a rename and a directory sync (about one fdatasync) when
// a spare segment is ready. Spares exist only once segments have grown to
// SegmentSizeBytes: the log keeps up to Options.Spares of them
// (SparesDefault, 2), released segments of the full size are renamed to
// "%016x.spare" instead of being removed
// (smaller ones are removed), and when none is left a goroutine fills a new
// one with zeros in the background while the current full-size segment
// fills. A rotation that finds no spare waits for the one being prepared,
// or writes a whole segment of zeros itself when none is (up to 64 MiB of
// writes and a sync, the cost the spares keep off the append path); a
// segment still growing, and a record larger than a segment, always do. A recycled spare keeps its old records:
// their LSNs are older than any the caller appends, so they end the log.
//
// # Identity and strict recovery
//
// A log opened with Options.ID (the bolt backend's) has an identity. Every
// segment starts with a header (SegmentHeaderSizeBytes: magic, the ID, the
// first LSN, the size it was created with, a CRC), written and synced
// before the segment gets its name; its records follow the header. A
// segment the log leaves for the next ends with a seal, a record header
// with the length 1<<31 and the next segment's first LSN, synced before
// the first record of the next one is. Every record leaves room for it.
// Open then applies strict rules: a header missing, damaged, or naming
// another first LSN or size than the file's; a segment of another log
// (*ForeignSegmentError, checked for every segment before any gap); a
// segment sealed with no successor; a record running past its file's
// end; a valid record or seal, newer than the last good record, anywhere
// behind the end of the last segment; a folder without segments; and a
// file the log did not write, are errors wrapping storage.ErrCorrupt that
// name the segment and the offset. Only a torn final record followed by
// unwritten space (zeros, a torn record's bytes, a recycled spare's older
// records) ends the log. Open changes nothing when it fails. Create makes
// a new log with an identity, Prepare its first segment before its first
// record; Salvage opens a log read-only keeping what precedes its first
// damage (Damage says what), for an operator who accepts the loss.
//
// A log without an identity (the zero ID) is one written by an earlier
// version, read by the rules of that version, where the log ends at the
// first bad record of its last segment.
//
// # Caveats
//
// The CRC detects torn and partial writes, not tampering: a record rewritten
// with a fresh CRC is accepted. The entries inside the records carry the
// chain's BLAKE3 links and are verified like any others once they are in
// bbolt. For the same reason the end of the log is found by content, so
// LSNs must only grow over the life of a directory: a caller that started
// its numbering again below LSNs written earlier could meet a stale record
// that matches, at an offset where the new numbering put a record of the
// same size. Bytes left behind (a torn record that a shorter one
// overwrote, the stale records of a recycled segment) are read as the next
// header only at the end of the last valid record; a payload crafted to
// hold a well-formed record with the next LSN at exactly that offset would
// be taken for one, which is tampering with the caller's input and the
// chain's verification, not the CRC's, to catch.
//
// On disk a log takes its segments plus, once they have grown to the full
// size, up to Options.Spares spares of SegmentSizeBytes each: 192 MiB with
// one segment at the default sizes. A new log takes SegmentSizeInitial before
// its first record. The space is what keeps appends from changing a
// file's size.
//
// One process writes a log at a time; the package takes no lock on the
// directory (the bolt backend holds the lock on its file). Append is not
// safe for concurrent use with itself or Close; Rotate, Release, LastLSN,
// FirstLSN and SizeBytes are safe alongside Append. Records reads the files
// as they are when it reaches them, so a Release during the iteration makes
// it fail: read the records at start, before releasing.
//
// An error of a write or a sync into a segment that holds or is receiving
// records poisons the log: every later Append returns an error wrapping
// ErrUnusable and storage.ErrIO, and the caller must reopen it. After a
// failed fdatasync the kernel may have dropped the dirty pages, so retrying
// on the same file could report success for data that is not on disk. A
// failure to create, zero-fill or rename a new segment, before any record
// went into it (a full disk), does not: Append returns it wrapped in
// storage.ErrIO with the system's words ("no space left on device"), the
// new file is removed, nothing is written, and the next Append tries again.
//
// Release removes one segment at a time and syncs the directory after each,
// oldest first, so that a crash in the middle leaves a log that still
// starts with a whole segment; a segment whose removal did not reach the
// disk comes back at Open with records the caller already has, which it
// skips with Records(afterLSN).
package wal
