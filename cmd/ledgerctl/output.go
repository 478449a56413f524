package main

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"text/tabwriter"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/spf13/cobra"

	"github.com/ledgerworks/ledger/chain"
)

// appendedJSON is the shape `append -o json` prints.
type appendedJSON struct {
	Chain          string `json:"chain"`
	Seq            uint64 `json:"seq"`
	TimeUnixNano   int64  `json:"time_unix_nano"`
	IdempotencyKey string `json:"idempotency_key"`
	Type           string `json:"type"`
	PrevHash       string `json:"prev_hash"`
	Hash           string `json:"hash"`
	Replayed       bool   `json:"replayed"`
}

func newAppendedJSON(res chain.Result) appendedJSON {
	e := res.Entry
	return appendedJSON{Chain: e.Chain, Seq: e.Seq, TimeUnixNano: e.TimeUnixNano, IdempotencyKey: e.IdempotencyKey,
		Type: e.Type, PrevHash: e.PrevHash.String(), Hash: e.Hash.String(), Replayed: res.Replayed}
}

// entryJSON is the shape of an entry in `get` and `log`: the fields of an
// export line, in the same order.
type entryJSON struct {
	Chain          string `json:"chain"`
	Seq            uint64 `json:"seq"`
	TimeUnixNano   int64  `json:"time_unix_nano"`
	IdempotencyKey string `json:"idempotency_key"`
	Type           string `json:"type"`
	Payload        string `json:"payload"` // standard base64, padded
	PrevHash       string `json:"prev_hash"`
	Hash           string `json:"hash"`
}

func newEntryJSON(e *chain.Entry) entryJSON {
	return entryJSON{Chain: e.Chain, Seq: e.Seq, TimeUnixNano: e.TimeUnixNano, IdempotencyKey: e.IdempotencyKey,
		Type: e.Type, Payload: base64.StdEncoding.EncodeToString(e.Payload), PrevHash: e.PrevHash.String(), Hash: e.Hash.String()}
}

// headJSON is the shape of a chain's head in `head` and `chains`.
type headJSON struct {
	Chain string `json:"chain"`
	Seq   uint64 `json:"seq"`
	Hash  string `json:"hash"`
}

func newHeadJSON(h chain.Head) headJSON {
	return headJSON{Chain: h.Chain, Seq: h.Seq, Hash: h.Hash.String()}
}

// formatTime renders entry times as RFC 3339 UTC with nanoseconds.
func formatTime(unixNano int64) string {
	return time.Unix(0, unixNano).UTC().Format(time.RFC3339Nano)
}

// printablePayload returns the payload as text when it is printable UTF-8
// on one line, else as "base64:" followed by its standard base64.
func printablePayload(payload []byte) string {
	if utf8.Valid(payload) {
		printable := true
		for _, r := range string(payload) {
			if unicode.IsControl(r) {
				printable = false
				break
			}
		}
		if printable {
			return string(payload)
		}
	}
	return "base64:" + base64.StdEncoding.EncodeToString(payload)
}

// writeEntryText prints an entry as aligned "field value" lines; replayed is
// printed when the entry is the result of an append.
func writeEntryText(w io.Writer, e *chain.Entry, withPayload bool, replayed *bool) error {
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	fmt.Fprintf(tw, "chain\t%s\n", e.Chain)
	fmt.Fprintf(tw, "seq\t%d\n", e.Seq)
	fmt.Fprintf(tw, "time\t%s (%d)\n", formatTime(e.TimeUnixNano), e.TimeUnixNano)
	fmt.Fprintf(tw, "idempotency_key\t%s\n", e.IdempotencyKey)
	fmt.Fprintf(tw, "type\t%s\n", e.Type)
	if withPayload {
		fmt.Fprintf(tw, "payload\t%s\n", printablePayload(e.Payload))
	}
	fmt.Fprintf(tw, "prev_hash\t%s\n", e.PrevHash)
	fmt.Fprintf(tw, "hash\t%s\n", e.Hash)
	if replayed != nil {
		fmt.Fprintf(tw, "replayed\t%s\n", strconv.FormatBool(*replayed))
	}
	return tw.Flush()
}

// writeJSONValue writes value as JSON without a trailing newline.
func writeJSONValue(w io.Writer, value any) error {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(value); err != nil {
		return err
	}
	_, err := w.Write(bytes.TrimSuffix(b.Bytes(), []byte("\n")))
	return err
}

// printList prints rows as a table, header first and one line a row, or
// with -o json as one object {"<field>": [...]} (an empty list is [], not
// null).
func printList[Row, JSON any](cmd *cobra.Command, a *app, rows []Row, field string, toJSON func(Row) JSON,
	header string, line func(Row) string) error {
	list := make([]JSON, 0, len(rows))
	for _, r := range rows {
		list = append(list, toJSON(r))
	}
	return a.print(cmd, map[string][]JSON{field: list}, func(w io.Writer) error {
		tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
		fmt.Fprintln(tw, header)
		for _, r := range rows {
			fmt.Fprintln(tw, line(r))
		}
		return tw.Flush()
	})
}
