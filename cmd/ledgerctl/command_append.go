package main

import (
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/ledgerworks/ledger/chain"
)

func init() { registerCommand(newAppendCommand) }

// appendOptions are the flags of append.
type appendOptions struct {
	typ  string
	key  string
	data string
}

func newAppendCommand(a *app) *cobra.Command {
	opts := appendOptions{}
	cmd := &cobra.Command{
		Use:   "append CHAIN --type TYPE [--key KEY] --data TEXT|@FILE|-",
		Short: "Append one entry; a retry with the same key prints the original entry",
		Long: "append appends one entry to CHAIN and prints it. With --key, a retry of the same request\n" +
			"prints the original entry with replayed=true and writes nothing; the same key with a\n" +
			"different type or payload is an idempotency conflict (exit 3).\n\n" +
			"--data is the payload: TEXT as given, @FILE for a file's bytes, - for standard input.",
		Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runAppend(cmd, a, opts, args[0])
		},
	}
	cmd.Flags().StringVar(&opts.typ, "type", "", "payload type, such as stock.movement/v1 (required)")
	cmd.Flags().StringVar(&opts.key, "key", "", "idempotency key: a retry with this key replays instead of appending")
	cmd.Flags().StringVar(&opts.data, "data", "", "payload: TEXT, @FILE or - for standard input (required)")
	return cmd
}

func runAppend(cmd *cobra.Command, a *app, opts appendOptions, chainName string) error {
	if !cmd.Flags().Changed("type") {
		return usageErrorf("append: --type is required")
	}
	if !cmd.Flags().Changed("data") {
		return usageErrorf("append: --data is required (TEXT, @FILE or - for standard input)")
	}
	payload, err := readData(cmd, opts.data)
	if err != nil {
		return err
	}
	req := chain.Request{Chain: chainName, IdempotencyKey: opts.key, Type: opts.typ, Payload: payload}
	// Refuse bad input before the ledger is opened (or waited for).
	if err := chain.ValidateRequest(req, 0); err != nil {
		return err
	}
	db, err := a.openDB(cmd.Context(), false)
	if err != nil {
		return err
	}
	defer db.Close()
	res, err := db.Append(cmd.Context(), req)
	if err != nil {
		return err
	}
	if err := db.Close(); err != nil {
		return err
	}
	return a.print(cmd, newAppendedJSON(res), func(w io.Writer) error {
		return writeEntryText(w, &res.Entry, false, &res.Replayed)
	})
}

// readData returns the payload --data names: the text itself, @FILE's bytes
// or standard input's for "-", at most chain.PayloadSizeMaxDefault bytes.
func readData(cmd *cobra.Command, data string) ([]byte, error) {
	return readDataFrom(data, cmd.InOrStdin(), func(name string) (io.ReadCloser, error) { return os.Open(name) })
}

// readDataFrom is readData with standard input and the file system given,
// so that the parser can be tested and fuzzed without either.
func readDataFrom(data string, stdin io.Reader, open func(name string) (io.ReadCloser, error)) ([]byte, error) {
	var r io.Reader
	var what string
	switch {
	case data == "-":
		r, what = stdin, "standard input"
	case strings.HasPrefix(data, "@"):
		f, err := open(data[1:])
		if err != nil {
			return nil, invalidInputf("--data %s: %v", data, err)
		}
		defer f.Close()
		r, what = f, data[1:]
	default:
		return []byte(data), nil
	}
	payload, err := io.ReadAll(io.LimitReader(r, chain.PayloadSizeMaxDefault+1))
	if err != nil {
		return nil, invalidInputf("--data: reading %s: %v", what, err)
	}
	if len(payload) > chain.PayloadSizeMaxDefault {
		return nil, &chain.InvalidError{Field: "payload", Err: chain.ErrPayloadTooLarge,
			Reason: fmt.Sprintf("%s holds more than %d bytes", what, chain.PayloadSizeMaxDefault)}
	}
	return payload, nil
}
