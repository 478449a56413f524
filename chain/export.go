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
// fields in their order, each once, no spaces, strings with only '"' and
// '\' escaped, integers without leading zeros, payload in padded standard
// base64, hashes in 64 lowercase hex digits, strings within the limits. That
// is the one spelling AppendExportLine gives an entry, so an accepted line
// re-encodes to itself. It checks shape, not hashes.
func DecodeExportLine(line []byte) (Entry, error) {
	if len(line) > ExportLineLengthMax {
		return Entry{}, exportLineError("%d bytes exceeds %d", len(line), ExportLineLengthMax)
	}
	if bytes.HasSuffix(line, []byte("\r")) {
		return Entry{}, exportLineError("ends with CR LF; Format v1 lines end with LF (0x0A) alone (convert the file with tr -d '\\r')")
	}
	p := lineParser{line: line}
	var e Entry
	var payload, prevHash, hash []byte
	p.literal(`{"chain":`)
	e.Chain = p.text("chain")
	p.literal(`,"seq":`)
	e.Seq = p.unsigned("seq")
	p.literal(`,"time_unix_nano":`)
	e.TimeUnixNano = p.signed("time_unix_nano")
	p.literal(`,"idempotency_key":`)
	e.IdempotencyKey = p.text("idempotency_key")
	p.literal(`,"type":`)
	e.Type = p.text("type")
	p.literal(`,"payload":`)
	payload = p.plain("payload", isBase64)
	p.literal(`,"prev_hash":`)
	prevHash = p.plain("prev_hash", isLowerHex)
	p.literal(`,"hash":`)
	hash = p.plain("hash", isLowerHex)
	p.literal(`}`)
	if p.err == nil && p.pos != len(line) {
		p.fail("data after the object")
	}
	if p.err != nil {
		if isFormatV1JSON(line) {
			return Entry{}, fmt.Errorf("%w; %w: the line is valid JSON with the Format v1 fields in a non-canonical form "+
				"(spaces, field order or escapes), which Format v1 refuses: export the chain again with ledgerctl export, "+
				"or rewrite the line as docs/FORMAT.md shows under \"Canonical lines\"", p.err, ErrNonCanonicalLine)
		}
		return Entry{}, p.err
	}
	if err := ValidateStoredRequest(Request{Chain: e.Chain, IdempotencyKey: e.IdempotencyKey, Type: e.Type}, PayloadSizeLimit); err != nil {
		return Entry{}, exportLineError("%v", err)
	}
	if e.Seq == 0 {
		return Entry{}, exportLineError("seq 0")
	}
	var err error
	if e.Payload, err = base64.StdEncoding.Strict().AppendDecode(make([]byte, 0, len(payload)/4*3), payload); err != nil {
		return Entry{}, exportLineError("payload: %v", err)
	}
	if e.PrevHash, err = parseLowerHash(string(prevHash)); err != nil {
		return Entry{}, exportLineError("prev_hash: %v", err)
	}
	if e.Hash, err = parseLowerHash(string(hash)); err != nil {
		return Entry{}, exportLineError("hash: %v", err)
	}
	return e, nil
}

// isFormatV1JSON reports whether line is a JSON object with exactly the
// export fields, each of its JSON type, so that a refusal can tell a
// re-serialised line from a damaged one.
func isFormatV1JSON(line []byte) bool {
	var fields map[string]json.RawMessage
	if json.Unmarshal(line, &fields) != nil || len(fields) != 8 {
		return false
	}
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.DisallowUnknownFields()
	var l ExportLine
	if dec.Decode(&l) != nil || dec.More() {
		return false
	}
	for _, name := range []string{"chain", "seq", "time_unix_nano", "idempotency_key", "type", "payload", "prev_hash", "hash"} {
		if _, ok := fields[name]; !ok {
			return false
		}
	}
	return true
}

func exportLineError(format string, args ...any) error {
	return fmt.Errorf("%w: export line: %s", ErrCorrupt, fmt.Sprintf(format, args...))
}

// lineParser reads the canonical spelling of an export line. After the
// first error every method does nothing, so DecodeExportLine reads as the
// format's field list.
type lineParser struct {
	line []byte
	pos  int
	err  error
}

func (p *lineParser) fail(format string, args ...any) {
	if p.err == nil {
		p.err = exportLineError("byte %d: %s", p.pos, fmt.Sprintf(format, args...))
	}
}

func (p *lineParser) literal(s string) {
	if p.err != nil {
		return
	}
	if !bytes.HasPrefix(p.line[p.pos:], []byte(s)) {
		p.fail("want %s", s)
		return
	}
	p.pos += len(s)
}

// text reads a JSON string in which only '"' and '\' are escaped.
func (p *lineParser) text(field string) string {
	if p.err != nil {
		return ""
	}
	if p.pos >= len(p.line) || p.line[p.pos] != '"' {
		p.fail("%s: want a string", field)
		return ""
	}
	p.pos++
	var b []byte
	for start := p.pos; ; {
		i := bytes.IndexAny(p.line[p.pos:], `"\`)
		if i < 0 {
			p.fail("%s: string not terminated", field)
			return ""
		}
		p.pos += i
		if p.line[p.pos] == '"' {
			b = append(b, p.line[start:p.pos]...)
			p.pos++
			return string(b)
		}
		if p.pos+1 >= len(p.line) || (p.line[p.pos+1] != '"' && p.line[p.pos+1] != '\\') {
			p.fail("%s: only \\\" and \\\\ may be escaped", field)
			return ""
		}
		b = append(b, p.line[start:p.pos]...)
		b = append(b, p.line[p.pos+1])
		p.pos += 2
		start = p.pos
	}
}

// plain reads a JSON string of characters that need no escape, all
// accepted by allowed.
func (p *lineParser) plain(field string, allowed func(c byte) bool) []byte {
	if p.err != nil {
		return nil
	}
	if p.pos >= len(p.line) || p.line[p.pos] != '"' {
		p.fail("%s: want a string", field)
		return nil
	}
	start := p.pos + 1
	end := start
	for end < len(p.line) && allowed(p.line[end]) {
		end++
	}
	if end >= len(p.line) || p.line[end] != '"' {
		p.pos = end
		p.fail("%s: unexpected character or end", field)
		return nil
	}
	p.pos = end + 1
	return p.line[start:end]
}

func isBase64(c byte) bool {
	return 'A' <= c && c <= 'Z' || 'a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '+' || c == '/' || c == '='
}

func isLowerHex(c byte) bool { return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' }

// digits reads one or more decimal digits without a leading zero.
func (p *lineParser) digits(field string) []byte {
	if p.err != nil {
		return nil
	}
	start := p.pos
	for p.pos < len(p.line) && '0' <= p.line[p.pos] && p.line[p.pos] <= '9' {
		p.pos++
	}
	d := p.line[start:p.pos]
	if len(d) == 0 || len(d) > 1 && d[0] == '0' {
		p.fail("%s: want a decimal integer without leading zeros", field)
		return nil
	}
	return d
}

func (p *lineParser) unsigned(field string) uint64 {
	d := p.digits(field)
	if p.err != nil {
		return 0
	}
	v, err := strconv.ParseUint(string(d), 10, 64)
	if err != nil {
		p.fail("%s: %v", field, err)
	}
	return v
}

func (p *lineParser) signed(field string) int64 {
	if p.err != nil {
		return 0
	}
	negative := p.pos < len(p.line) && p.line[p.pos] == '-'
	start := p.pos
	if negative {
		p.pos++
	}
	d := p.digits(field)
	if p.err != nil {
		return 0
	}
	if negative && string(d) == "0" {
		p.fail("%s: -0", field)
		return 0
	}
	v, err := strconv.ParseInt(string(p.line[start:p.pos]), 10, 64)
	if err != nil {
		p.fail("%s: %v", field, err)
	}
	return v
}

func parseLowerHash(s string) (Hash, error) {
	for _, c := range []byte(s) {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return Hash{}, fmt.Errorf("%q is not lowercase hex", s)
		}
	}
	return ParseHash(s)
}

// ExportReader reads an export line by line. Lines end with LF alone: a
// CR before it is part of the line, which DecodeExportLine refuses. Empty
// lines after the last entry are ignored (an editor's or a tool's final
// newline); an empty line before an entry is refused.
type ExportReader struct {
	scanner *bufio.Scanner
	line    int64
	blank   int64 // the first empty line since the last entry, or 0
}

// NewExportReader reads export lines from r.
func NewExportReader(r io.Reader) *ExportReader {
	s := bufio.NewScanner(r)
	s.Buffer(make([]byte, 0, 64*1024), ExportLineLengthMax+1)
	s.Split(splitLF)
	return &ExportReader{scanner: s}
}

// splitLF is bufio.ScanLines without its removal of a CR before the LF:
// Format v1 lines end with LF alone. A last line without its LF is a line.
func splitLF(data []byte, atEOF bool) (advance int, token []byte, err error) {
	if i := bytes.IndexByte(data, '\n'); i >= 0 {
		return i + 1, data[:i], nil
	}
	if atEOF && len(data) > 0 {
		return len(data), data, nil
	}
	return 0, nil, nil
}

// Next returns the next entry, io.EOF at the end, or an error naming the line.
func (r *ExportReader) Next() (Entry, error) {
	for {
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
		if len(r.scanner.Bytes()) != 0 {
			break
		}
		if r.blank == 0 {
			r.blank = r.line
		}
	}
	if r.blank != 0 {
		blank := r.blank
		r.blank = 0
		return Entry{}, fmt.Errorf("line %d: %w", blank, exportLineError("empty; empty lines may only follow the last entry"))
	}
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
