package bolt

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	bbolt "go.etcd.io/bbolt"

	"github.com/ledgerworks/ledger/storage"
)

// A backup is the file as of one moment, with everything the log held at
// that moment folded into it, written as one bbolt file that opens as a
// ledger on its own:
//
//   - Backup checkpoints the log under the writer slot, so that the file
//     holds every commit acknowledged before it, and begins a bbolt read
//     transaction before it lets the next commit in: the snapshot is the
//     file at that LSN. It releases the writer at once and then copies the
//     snapshot (bbolt's Tx.WriteTo) while commits go on.
//   - The copy still carries the original's log identity (meta/log_id,
//     log_state "open", log_dir). SealBackup, run on the copy once it is
//     on disk, removes them: the copy is a file that has no log, whose
//     first writable open starts one of its own beside it. It never
//     shares, and never looks for, the original's log.
//
// A long copy holds one read transaction: a checkpoint whose commit must
// grow the file's memory map waits for it (see the package documentation),
// and the pages it sees are not reused until it ends.

// BackupInfo is what a backup holds.
type BackupInfo struct {
	// CheckpointLSN is the last log record the copy holds (0 without the
	// log).
	CheckpointLSN uint64
	// Heads is every chain's head in the copy, in chain name order.
	Heads []storage.ChainHead
	// Entries is the sum of the heads' seqs.
	Entries uint64
	// Bytes is how many bytes Backup wrote (SealBackup may grow the file
	// by a few pages).
	Bytes int64
}

// backupWriterWaitMax bounds how long Backup waits for the writer slot.
const backupWriterWaitMax = time.Minute

// Backup writes a consistent copy of the ledger to w (see above) and
// returns what it holds. A read-only handle that replayed a log left by a
// crash cannot fold it in: it returns an error matching
// errors.ErrUnsupported (open the ledger for writing once, which
// checkpoints the log).
func (b *Backend) Backup(ctx context.Context, w io.Writer) (BackupInfo, error) {
	if b.closed.Load() {
		return BackupInfo{}, storage.ErrClosed
	}
	btx, err := b.beginBackup(ctx)
	if err != nil {
		return BackupInfo{}, err
	}
	defer btx.Rollback()
	info, err := backupHeads(b.path, btx)
	if err != nil {
		return BackupInfo{}, err
	}
	n, err := btx.WriteTo(w)
	if err != nil {
		return BackupInfo{}, fmt.Errorf("backup %s: %w: %v", b.path, storage.ErrIO, err)
	}
	info.Bytes = n
	return info, nil
}

// beginBackup returns a bbolt read transaction on a file that holds every
// commit acknowledged before the call.
func (b *Backend) beginBackup(ctx context.Context) (*bbolt.Tx, error) {
	if b.log == nil {
		if b.overlay {
			return nil, fmt.Errorf("backup %s: a read-only handle holds a recovered log in memory; open the ledger for writing once: %w",
				b.path, errors.ErrUnsupported)
		}
		return b.beginBolt(false)
	}
	ctx, cancel := context.WithTimeout(ctx, backupWriterWaitMax)
	defer cancel()
	if err := b.acquireWriter(ctx); err != nil {
		return nil, fmt.Errorf("backup %s: waiting for the writer: %w", b.path, err)
	}
	defer b.releaseWriter()
	if err := b.checkpointAll(ctx); err != nil {
		return nil, fmt.Errorf("backup %s: %w", b.path, err)
	}
	return b.beginBolt(false)
}

// checkpointAll puts every commit of the memory tables into the file; the
// caller holds the writer slot.
func (b *Backend) checkpointAll(ctx context.Context) error {
	if !b.active.Empty() {
		saved := b.memtableBytesMax
		b.memtableBytesMax = 0
		err := b.freezeWhenFull(ctx)
		b.memtableBytesMax = saved
		if err != nil {
			return err
		}
	}
	if err := b.waitCheckpoint(ctx); err != nil {
		return err
	}
	return b.failed()
}

// backupHeads reads every chain's head and the checkpoint LSN of a snapshot.
func backupHeads(path string, btx *bbolt.Tx) (info BackupInfo, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("backup %w", damagedError(path, p))
		}
	}()
	if info.CheckpointLSN, err = readCheckpointLSN(path, btx); err != nil {
		return BackupInfo{}, err
	}
	chains := btx.Bucket(BucketChains)
	if chains == nil {
		return BackupInfo{}, fmt.Errorf("backup %s: %w: no chains bucket", path, storage.ErrCorrupt)
	}
	err = chains.ForEach(func(k, v []byte) error {
		c, err := decodeChain(v)
		if err != nil {
			return fmt.Errorf("backup %s: chain %q: %w", path, k, err)
		}
		info.Heads = append(info.Heads, storage.ChainHead{Chain: string(k), Head: c.head})
		info.Entries += c.head.Seq
		return nil
	})
	return info, err
}

// SealBackup makes the bbolt file at path, written by Backup, a ledger of
// its own: it removes the original's log identity from its meta bucket
// (see above). It takes the file's lock and fsyncs its change.
func SealBackup(path string) (err error) {
	db, err := bbolt.Open(path, FileMode, &bbolt.Options{Timeout: time.Nanosecond})
	if err != nil {
		return openError(path, err)
	}
	defer func() {
		if p := recover(); p != nil {
			err = damagedError(path, p)
		}
		if cerr := db.Close(); err == nil && cerr != nil {
			err = fmt.Errorf("seal %s: %w: %v", path, storage.ErrIO, cerr)
		}
	}()
	return db.Update(func(btx *bbolt.Tx) error {
		meta := btx.Bucket(BucketMeta)
		if meta == nil || string(meta.Get(metaFormat)) == "" {
			return fmt.Errorf("seal %s: %w: not a ledger file", path, storage.ErrCorrupt)
		}
		for _, k := range [][]byte{metaLogID, metaLogDir} {
			if err := meta.Delete(k); err != nil {
				return fmt.Errorf("seal %s: %w: %v", path, storage.ErrIO, err)
			}
		}
		if meta.Get(metaLogState) == nil {
			return nil
		}
		if err := meta.Put(metaLogState, []byte(logStateClosed)); err != nil {
			return fmt.Errorf("seal %s: %w: %v", path, storage.ErrIO, err)
		}
		return nil
	})
}
