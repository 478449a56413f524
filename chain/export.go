package chain

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
)

// ExportLineLengthMax bounds one line of an export: the largest payload in
// base64 plus the other fields.
const ExportLineLengthMax = PayloadSizeLimit/3*4 + 4 + 4096

// ExportLine is one line of a Format v1 export, field for field.
type ExportLine struct {
	Chain          string `json:"chain"`
	Seq            uint64 `json:"seq"`
	TimeUnixNano   int64  `json:"time_unix_nano"`
	IdempotencyKey string `json:"idempotency_key"`
	Type           string `json:"type"`
	Payload        string `json:"payload"`
	PrevHash       string `json:"prev_hash"`
	Hash           string `json:"hash"`
}

// AppendExportLine appends e as one export line, newline included, with the
// fields in Format v1 order.
func AppendExportLine(b []byte, e *Entry) []byte {
	b = append(b, `{"chain":`...)
	b = appendJSONString(b, e.Chain)
	b = append(b, `,"seq":`...)
	b = strconv.AppendUint(b, e.Seq, 10)
	b = append(b, `,"time_unix_nano":`...)
	b = strconv.AppendInt(b, e.TimeUnixNano, 10)
	b = append(b, `,"idempotency_key":`...)
	b = appendJSONString(b, e.IdempotencyKey)
	b = append(b, `,"type":`...)
	b = appendJSONString(b, e.Type)
	b = append(b, `,"payload":"`...)
	b = base64.StdEncoding.AppendEncode(b, e.Payload)
	b = append(b, `","prev_hash":"`...)
	b = hex.AppendEncode(b, e.PrevHash[:])
	b = append(b, `","hash":"`...)
	b = hex.AppendEncode(b, e.Hash[:])
	return append(b, "\"}\n"...)
}

// appendJSONString appends s as a JSON string in which only '"' and '\\' are
// escaped. Every string of an entry is valid UTF-8 without control
// characters (the limits see to that), so this is valid JSON, and it is the
// one spelling of s that an export uses: a line's bytes are a function of
// its entry alone.
func appendJSONString(b []byte, s string) []byte {
	b = append(b, '"')
	for i := 0; i < len(s); i++ {
		if c := s[i]; c == '"' || c == '\\' {
			b = append(b, '\\')
		}
		b = append(b, s[i])
	}
	return append(b, '"')
}

// DecodeExportLine parses one export line strictly: exactly the Format v1
// fields, each present once, payload in padded standard base64, hashes in 64
// lowercase hex digits, strings within the limits, and the line spelled
// exactly as AppendExportLine spells its entry (field order, no spaces, only
// '"' and '\\' escaped), so that an accepted line re-encodes to itself. It
// checks shape, not hashes.
func DecodeExportLine(line []byte) (Entry, error) {
	fail := func(format string, args ...any) (Entry, error) {
		return Entry{}, fmt.Errorf("%w: export line: %s", ErrCorrupt, fmt.Sprintf(format, args...))
	}
	if len(line) > ExportLineLengthMax {
		return fail("%d bytes exceeds %d", len(line), ExportLineLengthMax)
	}
	if !bytes.HasPrefix(line, []byte(`{"chain":`)) {
		return fail(`does not start with {"chain":`)
	}
	// One permissive decode, then the canonical check below refuses every
	// other spelling: missing, repeated, reordered or unknown fields, spaces,
	// escapes, number forms.
	var l ExportLine
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&l); err != nil {
		return fail("%v", err)
	}
	if dec.InputOffset() != int64(len(line)) {
		return fail("data after the object")
	}
	e := Entry{Chain: l.Chain, Seq: l.Seq, TimeUnixNano: l.TimeUnixNano, IdempotencyKey: l.IdempotencyKey, Type: l.Type}
	if err := ValidateRequest(Request{Chain: e.Chain, IdempotencyKey: e.IdempotencyKey, Type: e.Type}, PayloadSizeLimit); err != nil {
		return fail("%v", err)
	}
	if e.Seq == 0 {
		return fail("seq 0")
	}
	payload, err := base64.StdEncoding.Strict().DecodeString(l.Payload)
	if err != nil {
		return fail("payload: %v", err)
	}
	if len(payload) > PayloadSizeLimit {
		return fail("payload of %d bytes", len(payload))
	}
	e.Payload = payload
	if e.PrevHash, err = parseLowerHash(l.PrevHash); err != nil {
		return fail("prev_hash: %v", err)
	}
	if e.Hash, err = parseLowerHash(l.Hash); err != nil {
		return fail("hash: %v", err)
	}
	if canonical := AppendExportLine(nil, &e); !bytes.Equal(canonical[:len(canonical)-1], line) {
		return fail("not in canonical form (each Format v1 field once and in order, no spaces, only '\"' and '\\' escaped)")
	}
	return e, nil
}

func parseLowerHash(s string) (Hash, error) {
	for _, c := range []byte(s) {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return Hash{}, fmt.Errorf("%q is not lowercase hex", s)
		}
	}
	return ParseHash(s)
}

// ExportReader reads an export line by line.
type ExportReader struct {
	scanner *bufio.Scanner
	line    int64
}

// NewExportReader reads export lines from r.
func NewExportReader(r io.Reader) *ExportReader {
	s := bufio.NewScanner(r)
	s.Buffer(make([]byte, 0, 64*1024), ExportLineLengthMax+1)
	return &ExportReader{scanner: s}
}

// Next returns the next entry, io.EOF at the end, or an error naming the line.
func (r *ExportReader) Next() (Entry, error) {
	if !r.scanner.Scan() {
		if err := r.scanner.Err(); err != nil {
			if errors.Is(err, bufio.ErrTooLong) {
				return Entry{}, fmt.Errorf("line %d: %w: longer than %d bytes", r.line+1, ErrCorrupt, ExportLineLengthMax)
			}
			return Entry{}, fmt.Errorf("line %d: %w", r.line+1, err)
		}
		return Entry{}, io.EOF
	}
	r.line++
	e, err := DecodeExportLine(r.scanner.Bytes())
	if err != nil {
		return Entry{}, fmt.Errorf("line %d: %w", r.line, err)
	}
	return e, nil
}

// Line returns the number of the line last read.
func (r *ExportReader) Line() int64 { return r.line }

// Export writes the chains' entries to w as Format v1 JSON Lines, chain after
// chain, each in seq order. progress, when set, is called with the running
// entry count every few thousand entries.
func (db *DB) Export(ctx context.Context, w io.Writer, chains []string, progress func(entries int64)) (int64, error) {
	bw := bufio.NewWriterSize(w, 1<<16)
	var n int64
	var buf []byte
	for _, chain := range chains {
		if _, err := db.Head(ctx, chain); err != nil {
			return n, err
		}
		for e, err := range db.Entries(ctx, chain, 1) {
			if err != nil {
				return n, err
			}
			buf = AppendExportLine(buf[:0], &e)
			if _, err := bw.Write(buf); err != nil {
				return n, err
			}
			if n++; progress != nil && n%progressInterval == 0 {
				progress(n)
			}
		}
	}
	if progress != nil {
		progress(n)
	}
	return n, bw.Flush()
}

// VerifyExport checks an export without a database: every line decodes, every
// hash matches, every link holds, seqs run from 1 without gaps, and each
// chain's lines are contiguous. A chain whose lines resume after another
// chain's is reported once and then checked on from where it stopped. A line
// that does not decode ends the check with a failure, since nothing after it
// can be trusted to be aligned. Memory grows with the number of chains, not
// entries.
func VerifyExport(ctx context.Context, r io.Reader, opts VerifyOptions) (Report, error) {
	var report Report
	c := &collector{report: &report, max: opts.FailuresMax}
	if c.max <= 0 {
		c.max = FailuresMaxDefault
	}
	want := map[string]map[uint64]Hash{}
	for _, h := range opts.ExpectHeads {
		if checkEmptyHead(h, c.add) {
			continue
		}
		if want[h.Chain] == nil {
			want[h.Chain] = map[uint64]Hash{}
		}
		want[h.Chain][h.Seq] = h.Hash
	}
	verifiers := map[string]*ChainVerifier{}
	var v *ChainVerifier
	progress := func() {
		if opts.Progress != nil {
			opts.Progress(Progress{Chains: report.Chains, Entries: report.Entries})
		}
	}
	reader := NewExportReader(r)
	for {
		if err := ctx.Err(); err != nil {
			return report, err
		}
		e, err := reader.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			f := Failure{Reason: ReasonUndecodable, Detail: err.Error()}
			if v != nil { // the line most likely holds the current chain's next entry
				f.Chain, f.Seq = v.chain, v.next
			}
			c.add(f)
			break
		}
		if v == nil || e.Chain != v.chain {
			if v != nil {
				report.Chains++ // chains whose lines have ended, for progress
			}
			if v = verifiers[e.Chain]; v != nil {
				c.add(Failure{Chain: e.Chain, Seq: e.Seq, Reason: ReasonSeqGap, Detail: "chain's lines are not contiguous"})
			} else {
				v = NewChainVerifier(e.Chain, c.add)
				verifiers[e.Chain] = v
			}
		}
		v.Entry(&e)
		if h, ok := want[e.Chain][e.Seq]; ok {
			if h != e.Hash {
				c.add(Failure{Chain: e.Chain, Seq: e.Seq, Reason: ReasonHeadMismatch,
					Detail: "entry differs from the saved head", Expected: h, Calculated: e.Hash})
			}
			delete(want[e.Chain], e.Seq)
		}
		if report.Entries++; report.Entries%progressInterval == 0 {
			progress()
		}
	}
	report.Chains = int64(len(verifiers))
	for chain, heads := range want {
		for seq, h := range heads {
			detail := "chain is not in the export"
			if v := verifiers[chain]; v != nil {
				detail = fmt.Sprintf("saved head seq %d is beyond the export's end at seq %d", seq, v.Last().Seq)
			}
			c.add(Failure{Chain: chain, Seq: seq, Reason: ReasonHeadMismatch, Detail: detail, Expected: h})
		}
	}
	sortFailures(report.Failures)
	progress()
	return report, nil
}
