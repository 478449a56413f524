package chain

import (
	"context"

	"github.com/ledgerworks/ledger/storage"
)

// replayedBatch answers a retried batch without the writer (see
// DB.AppendBatch): found is true, and results extended by the replays, when
// every request's key maps to its own request's entry. An error ends it:
// the *ConflictError of the first request that conflicts when every
// request before it was a replay, a damaged index's, the store's. Any
// other case (a request without a key, a key not found, no KeyReader) is
// found false, for a transaction to decide.
func (db *DB) replayedBatch(ctx context.Context, reqs []Request, results []Result) (out []Result, found bool, err error) {
	if db.keyReader == nil || len(reqs) == 0 {
		return results, false, nil
	}
	for _, req := range reqs {
		if req.IdempotencyKey == "" {
			return results, false, nil
		}
	}
	if db.replayUnlocked {
		if db.closed.Load() {
			return results, false, ErrClosed
		}
	} else {
		if err := db.enter(); err != nil {
			return results, false, err
		}
		defer db.mu.RUnlock()
	}
	batchReader, ok := db.keyReader.(storage.KeyBatchReader)
	if !ok {
		return db.replayedEach(ctx, reqs, results)
	}
	var scratch replayScratch
	out = results
	for len(reqs) > 0 {
		part := reqs[:min(len(reqs), storage.ReadKeysMax)]
		reqs = reqs[len(part):]
		keys, reads := scratch.grow(part)
		if err := batchReader.ReadKeys(ctx, keys, reads); err != nil {
			return results, false, storageError(err)
		}
		for i, req := range part {
			if !reads[i].Found {
				return results, false, nil
			}
			res, _, err := replayRecord(req, reads[i].Seq, reads[i].Data, true)
			if err != nil {
				return results, true, err
			}
			out = append(out, res)
		}
	}
	db.countReplays(len(out) - len(results))
	return out, true, nil
}

// replayedEach is replayedBatch with a KeyReader that reads one key at a
// time.
func (db *DB) replayedEach(ctx context.Context, reqs []Request, results []Result) ([]Result, bool, error) {
	out := results
	for _, req := range reqs {
		res, found, err := db.readKey(ctx, req)
		if err != nil {
			return results, found, err
		}
		if !found {
			return results, false, nil
		}
		out = append(out, res)
	}
	db.countReplays(len(out) - len(results))
	return out, true, nil
}

func (db *DB) countReplays(n int) {
	if db.metrics == nil {
		return
	}
	for range n {
		db.metrics.Replayed()
	}
}

// replayScratch holds the keys and reads of one ReadKeys call.
type replayScratch struct {
	keys  []storage.ChainKey
	reads []storage.KeyRead
}

func (s *replayScratch) grow(part []Request) ([]storage.ChainKey, []storage.KeyRead) {
	s.keys = s.keys[:0]
	for _, req := range part {
		s.keys = append(s.keys, storage.ChainKey{Chain: req.Chain, Key: req.IdempotencyKey})
	}
	if cap(s.reads) < len(part) {
		s.reads = make([]storage.KeyRead, len(part))
	}
	return s.keys, s.reads[:len(part)]
}
