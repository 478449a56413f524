package bolt

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/ledgerworks/ledger/storage"
	"github.com/ledgerworks/ledger/storage/bolt/internal/commitrec"
	"github.com/ledgerworks/ledger/storage/bolt/internal/memtable"
	"github.com/ledgerworks/ledger/storage/bolt/internal/wal"
)

// LogLoss is what AcceptLogLoss did.
type LogLoss struct {
	// Log is the log folder found; "" when there was none.
	Log string
	// KeptAs is where the folder was moved, untouched, for an operator;
	// "" when nothing was moved.
	KeptAs string
	// Replayed is how many records of the log were put into the file.
	Replayed uint64
	// CheckpointLSN is the last log record the file holds afterwards.
	CheckpointLSN uint64
	// Damage says what ended the records that were kept; "" when the log
	// was intact (or missing).
	Damage string
}

// AcceptLogLoss makes a ledger whose log cannot be recovered (damaged,
// missing, of another file) open again, accepting the loss of what the log
// held past its damage: it puts into the file every record of the file's
// own log that precedes the damage and continues the file, moves the log
// folder aside to "<folder>.discarded-<UTC time>" (nothing in it is
// deleted), and records that the file was closed cleanly. It takes the
// file's lock like a writable Open, and does nothing more to a ledger whose
// log is intact than an Open and Close would. It is the explicit step an
// operator takes after Open failed with ErrCorrupt naming the log.
func AcceptLogLoss(path string, opts Options) (LogLoss, error) {
	if _, err := os.Stat(path); err != nil {
		return LogLoss{}, fmt.Errorf("open %s: %w", path, storage.ErrNotFound)
	}
	opts.ReadOnly = false
	b, err := openFile(path, opts)
	if err != nil {
		return LogLoss{}, err
	}
	defer b.db.Close()
	ident, err := b.readLogIdentity()
	if err != nil {
		return LogLoss{}, err
	}
	dir, exists, err := b.findLogDirectory(ident)
	if err != nil {
		return LogLoss{}, fmt.Errorf("open %s: %w", path, err)
	}
	var loss LogLoss
	if exists {
		loss, err = b.salvageLog(dir, ident.id)
		if err != nil {
			return loss, err
		}
	}
	if ident.open || exists {
		if err := b.markLogClosed(); err != nil {
			return loss, err
		}
	}
	checkpoint, err := b.checkpointLSN()
	if err != nil {
		return loss, err
	}
	loss.CheckpointLSN = checkpoint
	if err := b.db.Close(); err != nil {
		return loss, fmt.Errorf("close %s: %w: %v", path, storage.ErrIO, err)
	}
	return loss, nil
}

// salvageLog puts what can be kept of the log in dir into the file, then
// moves the folder aside.
func (b *Backend) salvageLog(dir string, id wal.ID) (LogLoss, error) {
	loss := LogLoss{Log: dir}
	lg, err := wal.Open(dir, wal.Options{Salvage: true, ID: id})
	if err != nil {
		return loss, fmt.Errorf("open %s: %w", b.path, err)
	}
	if damage := lg.Damage(); damage != nil {
		loss.Damage = damage.Error()
	}
	m, replayed, damage, err := b.salvageRecords(lg)
	lg.Close()
	if err != nil {
		return loss, err
	}
	if damage != nil && loss.Damage == "" {
		loss.Damage = damage.Error()
	}
	if !m.Empty() {
		if err := b.checkpoint(m); err != nil {
			return loss, fmt.Errorf("open %s: the kept records of the log cannot be checkpointed into the file, and the log %s is kept: %w",
				b.path, dir, err)
		}
	}
	loss.Replayed = replayed
	kept := fmt.Sprintf("%s.discarded-%s", dir, time.Now().UTC().Format("20060102T150405.000000000Z"))
	if err := os.Rename(dir, kept); err != nil {
		return loss, fmt.Errorf("move the log %s aside: %w: %v", dir, storage.ErrIO, err)
	}
	if err := syncFolder(filepath.Dir(dir)); err != nil {
		return loss, fmt.Errorf("move the log %s aside: %w: %v", dir, storage.ErrIO, err)
	}
	loss.KeptAs = kept
	return loss, nil
}

// salvageRecords reads the records that continue the file's checkpoint, up
// to the first that cannot be read or applied, into a memory table.
func (b *Backend) salvageRecords(lg *wal.Log) (*memtable.Table, uint64, error, error) {
	checkpoint, err := b.checkpointLSN()
	if err != nil {
		return nil, 0, nil, err
	}
	m := memtable.New()
	if lg.LastLSN() <= checkpoint {
		return m, 0, nil, nil
	}
	if lg.FirstLSN() > checkpoint+1 {
		return m, 0, fmt.Errorf("the log starts at LSN %d, the file is checkpointed through %d", lg.FirstLSN(), checkpoint), nil
	}
	expected, count := checkpoint+1, uint64(0)
	for rec, err := range lg.Records(checkpoint) {
		if err != nil {
			return m, count, err, nil
		}
		if rec.LSN != expected {
			return m, count, fmt.Errorf("log record %d where %d was expected", rec.LSN, expected), nil
		}
		payload := slices.Clone(rec.Payload)
		operations, err := commitrec.Decode(payload)
		if err == nil {
			err = m.Check(operations)
		}
		if err != nil {
			return m, count, fmt.Errorf("log record %d: %w", rec.LSN, err), nil
		}
		m.Apply(rec.LSN, payload, operations)
		expected++
		count++
	}
	return m, count, nil, nil
}
