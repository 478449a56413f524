package keyrun

import (
	"encoding/binary"
	"fmt"
	"math"
	"slices"

	bbolt "go.etcd.io/bbolt"

	"github.com/ledgerworks/ledger/storage"
	"github.com/ledgerworks/ledger/storage/bolt/internal/keyindex"
)

// MergeBucket is the top-level bucket of the merge in progress: a merge
// whose records do not fit one transaction (Cache.MergeRecordsMax) is
// spread over several, each of which writes at most that many records of
// its output. It holds the merge's state and its output so far, a bucket
// named as the run it becomes; readers ignore it, and lookups see the
// merge's sources, which stay runs until the transaction that finishes
// the merge moves the output under key_runs and deletes them. A file
// whose merge bucket names a source that is no longer a run (a process
// that did not know the bucket merged them) drops the merge.
var MergeBucket = []byte("key_merge")

const (
	// StepShareDen is the part of Cache.MergeRecordsMax one step of a
	// merge in progress writes at most. A step comes with every
	// transaction that writes a run while the merge lasts (a merge in one
	// transaction only when a level fills), so its memory adds to the
	// memory tables' far more often; and bbolt rewrites the output's last
	// leaf at each step and copies the step's nodes again when its commit
	// grows the map. Steps of the whole MergeRecordsMax took a writer past
	// its bound where steps of a quarter did not.
	StepShareDen = 4
	// StepChunksMin is how many chunks a step of StepShareDen's records
	// writes at least: a merge's output has chunks of fewer records than
	// keyindex.ChunkRecords under a small bound, so that the last leaf a
	// step rewrites (two chunks) stays small beside it. A run of
	// RunRecordsMax records then has about 820 chunks whatever the bound,
	// within TableChunksMax.
	StepChunksMin = 8
)

// stepRecordsMax is how many records one step of a merge in progress
// writes at most (0: no bound).
func (c *Cache) stepRecordsMax() uint64 {
	if c.MergeRecordsMax == 0 {
		return 0
	}
	return max(c.MergeRecordsMax/StepShareDen, 1)
}

// stepChunkRecords is the records of a chunk of a merge's output.
func (c *Cache) stepChunkRecords() int {
	if c.MergeRecordsMax == 0 {
		return keyindex.ChunkRecords
	}
	return int(StepChunkRecords(c.stepRecordsMax()))
}

// StepChunkRecords is the records of a chunk of the output of a merge
// written in steps of stepRecords.
func StepChunkRecords(stepRecords uint64) uint64 {
	return min(keyindex.ChunkRecords, max(stepRecords/StepChunksMin, 1))
}

// The keys of the merge bucket beside its output.
var (
	mergeSourcesKey = []byte("sources") // n × Name, the runs merged
	mergeReadKey    = []byte("read")    // n × u64be, the records taken from each
	mergeOutputKey  = []byte("output")  // Name of the output, a bucket beside
	mergeWrittenKey = []byte("written") // u64be, the records the output holds
)

// merging is the state of the merge in progress.
type merging struct {
	bucket  *bbolt.Bucket
	sources []*Run
	read    []uint64
	output  Name
	written uint64
	total   uint64
}

// busy reports whether the run is a source of the merge.
func (m *merging) busy(r *Run) bool { return m != nil && slices.Contains(m.sources, r) }

// loadMerge reads the merge in progress of a write transaction, nil when
// none is. A merge a process without the merge bucket made stale (one of
// its sources is no longer a run, or a run holds its output's name) is
// dropped.
func (v *View) loadMerge(h Host) (*merging, error) {
	btx := h.BoltTx()
	mb := btx.Bucket(MergeBucket)
	if mb == nil {
		return nil, nil
	}
	path := h.FilePath()
	sv, rv, ov, wv := mb.Get(mergeSourcesKey), mb.Get(mergeReadKey), mb.Get(mergeOutputKey), mb.Get(mergeWrittenKey)
	n := len(sv) / len(Name{})
	if n < 2 || len(sv) != n*len(Name{}) || len(rv) != n*8 || len(ov) != len(Name{}) || len(wv) != 8 {
		return nil, fmt.Errorf("%s: %w: key merge state", path, storage.ErrCorrupt)
	}
	m := &merging{bucket: mb, output: Name(ov), written: binary.BigEndian.Uint64(wv)}
	var read uint64
	for i := range n {
		name := Name(sv[i*len(Name{}):])
		at := slices.IndexFunc(v.runs, func(r *Run) bool { return r.name == name })
		if at < 0 {
			return nil, v.dropMerge(h)
		}
		r := v.runs[at]
		m.sources = append(m.sources, r)
		m.read = append(m.read, binary.BigEndian.Uint64(rv[i*8:]))
		if m.read[i] > r.count {
			return nil, fmt.Errorf("%s: %w: key merge read %d of run %x's %d records", path, storage.ErrCorrupt, m.read[i], name, r.count)
		}
		m.total += r.count
		read += m.read[i]
	}
	if read != m.written || mb.Bucket(m.output[:]) == nil {
		return nil, fmt.Errorf("%s: %w: key merge wrote %d records of %d read", path, storage.ErrCorrupt, m.written, read)
	}
	if h.RunsBucket().Bucket(m.output[:]) != nil {
		return nil, v.dropMerge(h)
	}
	return m, nil
}

// dropMerge deletes the merge bucket: its sources stay runs.
func (v *View) dropMerge(h Host) error {
	if err := h.BoltTx().DeleteBucket(MergeBucket); err != nil {
		return h.WriteError(err)
	}
	return nil
}

// startMerge records a merge of runs of one level into a run of a higher
// level (see merge) that transactions write from now on (Step), named as
// a run this transaction writes (newName): no run the transaction wrote
// or writes after it holds the output's name.
func (v *View) startMerge(h Host, runs []*Run) error {
	from := runs[0].level()
	if from == math.MaxUint8 {
		panic(fmt.Sprintf("keyrun: a merge of runs at level %d", from))
	}
	var total uint64
	sources := make([]byte, 0, len(runs)*len(Name{}))
	for _, r := range runs {
		total += r.count
		sources = append(sources, r.name[:]...)
	}
	output := v.newName(h, max(Level(total), from+1))
	mb, err := h.BoltTx().CreateBucket(MergeBucket)
	if err != nil {
		return h.WriteError(err)
	}
	if _, err := mb.CreateBucket(output[:]); err != nil {
		return h.WriteError(err)
	}
	for _, kv := range [][2][]byte{
		{mergeSourcesKey, sources},
		{mergeReadKey, make([]byte, len(runs)*8)},
		{mergeOutputKey, output[:]},
		{mergeWrittenKey, make([]byte, 8)},
	} {
		if err := mb.Put(kv[0], kv[1]); err != nil {
			return h.WriteError(err)
		}
	}
	return nil
}

// Step advances the merge in progress, if any, within what the
// transaction may still merge (Cache.MergeRecordsMax less what its merges
// took, and a StepShareDen-th of it at most): it writes the next records
// of the output, or, once the output holds them all, finishes the merge
// (its filter, and the output replacing its sources) in a transaction
// that has merged nothing else, and then starts merging a level that
// holds Fanout runs (settle).
func (v *View) Step(h Host) error {
	if err := v.Load(h); err != nil {
		return err
	}
	m, err := v.loadMerge(h)
	if err != nil || m == nil {
		return err
	}
	if m.written == m.total {
		if v.mergedRecords > 0 { // maybe wrote the output's last records
			return nil
		}
		if err := v.finishMerge(h, m); err != nil {
			return err
		}
		return v.settle(h)
	}
	cache := h.RunCache()
	n := m.total - m.written
	if capacity := cache.MergeRecordsMax; capacity > 0 {
		if v.mergedRecords >= capacity {
			return nil
		}
		n = min(n, capacity-v.mergedRecords, cache.stepRecordsMax())
	}
	return v.advanceMerge(h, m, n)
}

// advanceMerge writes the next n records of the merge's output.
func (v *View) advanceMerge(h Host, m *merging, n uint64) error {
	src, err := openSources(h, m.sources, m.read)
	if err != nil {
		return err
	}
	records, err := src.take(make([]byte, 0, n*keyindex.RecordSize), n)
	if err != nil {
		return err
	}
	if uint64(len(records)/keyindex.RecordSize) != n {
		return fmt.Errorf("%s: %w: key runs hold fewer records than their headers say (%d)", h.FilePath(), storage.ErrCorrupt, m.total)
	}
	out := m.bucket.Bucket(m.output[:])
	out.FillPercent = 1.0
	if err := putChunks(h, out, records, h.RunCache().stepChunkRecords()); err != nil {
		return err
	}
	read := make([]byte, 0, len(m.read)*8)
	for i := range m.read {
		m.read[i] += src.taken[i]
		read = binary.BigEndian.AppendUint64(read, m.read[i])
	}
	m.written += n
	if err := m.bucket.Put(mergeReadKey, read); err != nil {
		return h.WriteError(err)
	}
	if err := m.bucket.Put(mergeWrittenKey, binary.BigEndian.AppendUint64(nil, m.written)); err != nil {
		return h.WriteError(err)
	}
	v.mergedRecords += n
	return nil
}

// finishMerge moves the output under key_runs, writes its filter and
// count, and deletes its sources and the merge bucket, in a transaction
// that has not written the output. Its filter is
// built from the output's chunks, where they lie in the file's map: the
// transaction holds it several times (FinishBytes), which
// Cache.RunRecordsMax bounds; it counts as a full merge.
func (v *View) finishMerge(h Host, m *merging) error {
	path := h.FilePath()
	out := m.bucket.Bucket(m.output[:])
	filter := make([]byte, keyindex.FilterBytes(m.total))
	var count uint64
	var last []byte
	cur := out.Cursor()
	for k, val := cur.First(); k != nil; k, val = cur.Next() {
		if len(k) != keyindex.RecordPrefixSize || len(val) == 0 || len(val)%keyindex.RecordSize != 0 {
			return fmt.Errorf("%s: %w: key merge output chunk %x of %d bytes", path, storage.ErrCorrupt, k, len(val))
		}
		if last != nil && string(k) <= string(last) {
			return fmt.Errorf("%s: %w: key merge output out of order", path, storage.ErrCorrupt)
		}
		last = k
		for o := 0; o < len(val); o += keyindex.RecordSize {
			keyindex.FilterBytesAdd(filter, binary.BigEndian.Uint64(val[o:]), val[o+8:o+keyindex.RecordPrefixSize])
		}
		count += uint64(len(val) / keyindex.RecordSize)
	}
	if count != m.total {
		return fmt.Errorf("%s: %w: key merge output holds %d records, its sources %d", path, storage.ErrCorrupt, count, m.total)
	}
	// bbolt moves a bucket as its last commit left it (the changes of
	// this transaction to it would be lost): it moves first.
	if err := m.bucket.MoveBucket(m.output[:], h.RunsBucket()); err != nil {
		return h.WriteError(err)
	}
	run := h.RunsBucket().Bucket(m.output[:])
	if err := run.Put(FilterKey, filter); err != nil {
		return h.WriteError(err)
	}
	if err := run.Put(CountKey, binary.BigEndian.AppendUint64(nil, count)); err != nil {
		return h.WriteError(err)
	}
	if err := v.drop(h, m.sources); err != nil {
		return err
	}
	if err := v.dropMerge(h); err != nil {
		return err
	}
	r := &Run{name: m.output, count: count}
	v.runs = append(v.runs, r)
	v.filters = nil // read again at the next lookup
	v.created = append(v.created, r)
	v.changed = true
	v.mergedRecords = max(v.mergedRecords, h.RunCache().MergeRecordsMax, 1)
	return nil
}

// drop deletes runs from the file and the view.
func (v *View) drop(h Host, runs []*Run) error {
	for _, r := range runs {
		if err := h.RunsBucket().DeleteBucket(r.name[:]); err != nil {
			return h.WriteError(err)
		}
		v.runs = slices.DeleteFunc(v.runs, func(x *Run) bool { return x == r })
		v.filters = nil // read again at the next lookup
		if i := slices.IndexFunc(v.created, func(x *Run) bool { return x == r }); i >= 0 {
			v.created = slices.Delete(v.created, i, i+1)
		} else {
			v.deleted = append(v.deleted, r.name)
		}
		v.changed = true
	}
	return nil
}

// putChunks writes sorted records into a run's bucket as chunks of up to
// chunkRecords records, each keyed by its last record's prefix.
func putChunks(h Host, b *bbolt.Bucket, records []byte, chunkRecords int) error {
	for o := 0; o < len(records); o += chunkRecords * keyindex.RecordSize {
		chunk := records[o:min(o+chunkRecords*keyindex.RecordSize, len(records))]
		last := chunk[len(chunk)-keyindex.RecordSize : len(chunk)-keyindex.RecordSize+keyindex.RecordPrefixSize]
		if err := b.Put(last, chunk); err != nil {
			return h.WriteError(err)
		}
	}
	return nil
}

// sources reads runs in record order, merged.
type sources struct {
	path    string
	runs    []*Run
	cursors []*bbolt.Cursor
	chunks  [][]byte // the unread rest of each run's current chunk
	// heads holds the first unread record of each run, decoded: the merge
	// compares words, not bytes.
	heads []keyindex.RecordKey
	taken []uint64 // the records taken from each run
}

// openSources opens the runs at their skip-th record (skip nil: the first).
func openSources(h Host, runs []*Run, skip []uint64) (*sources, error) {
	s := &sources{path: h.FilePath(), runs: runs, cursors: make([]*bbolt.Cursor, len(runs)),
		chunks: make([][]byte, len(runs)), heads: make([]keyindex.RecordKey, len(runs)), taken: make([]uint64, len(runs))}
	for i, r := range runs {
		b := h.RunsBucket().Bucket(r.name[:])
		if b == nil {
			return nil, fmt.Errorf("%s: %w: key run %x missing", s.path, storage.ErrCorrupt, r.name)
		}
		s.cursors[i] = b.Cursor()
		var rest uint64
		if skip != nil {
			rest = skip[i]
		}
		k, chunk := s.cursors[i].First()
		for ; k != nil && len(k) == keyindex.RecordPrefixSize; k, chunk = s.cursors[i].Next() {
			if len(chunk) == 0 || len(chunk)%keyindex.RecordSize != 0 {
				return nil, fmt.Errorf("%s: %w: key run %x chunk of %d bytes", s.path, storage.ErrCorrupt, r.name, len(chunk))
			}
			if n := uint64(len(chunk) / keyindex.RecordSize); rest >= n {
				rest -= n
				continue
			}
			s.chunks[i] = chunk[rest*keyindex.RecordSize:]
			rest = 0
			break
		}
		if rest > 0 {
			return nil, fmt.Errorf("%s: %w: key run %x holds fewer records than a merge read", s.path, storage.ErrCorrupt, r.name)
		}
		if len(s.chunks[i]) > 0 {
			s.heads[i] = keyindex.LoadRecord(s.chunks[i])
		}
	}
	return s, nil
}

// next moves past the first unread record of run i.
func (s *sources) next(i int) error {
	s.taken[i]++
	s.chunks[i] = s.chunks[i][keyindex.RecordSize:]
	if len(s.chunks[i]) == 0 {
		var k []byte
		if k, s.chunks[i] = s.cursors[i].Next(); k == nil || len(k) != keyindex.RecordPrefixSize {
			s.chunks[i] = nil
		}
	}
	if len(s.chunks[i])%keyindex.RecordSize != 0 {
		return fmt.Errorf("%s: %w: key run %x chunk of %d bytes", s.path, storage.ErrCorrupt, s.runs[i].name, len(s.chunks[i]))
	}
	if len(s.chunks[i]) > 0 {
		s.heads[i] = keyindex.LoadRecord(s.chunks[i])
	}
	return nil
}

// take appends the next n records, in order, to records (fewer when the
// runs end first).
func (s *sources) take(records []byte, n uint64) ([]byte, error) {
	for ; n > 0; n-- {
		best := -1
		for i, c := range s.chunks {
			if len(c) == 0 {
				continue
			}
			if best < 0 || keyindex.CompareRecords(s.heads[i], s.heads[best]) < 0 {
				best = i
			}
		}
		if best < 0 {
			break
		}
		records = append(records, s.chunks[best][:keyindex.RecordSize]...)
		if err := s.next(best); err != nil {
			return nil, err
		}
	}
	return records, nil
}
