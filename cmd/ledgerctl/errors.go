package main

import (
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/ledgerworks/ledger/chain"
	"github.com/ledgerworks/ledger/internal/errcode"
)

// Exit codes (docs/CLI.md). They are part of the command line's contract.
const (
	exitSuccess      = 0 // the command did what was asked
	exitVerification = 1 // verification found a broken chain or export
	exitUsage        = 2 // bad arguments, flags or input
	exitConflict     = 3 // an idempotency key is held by a different request
	exitNotFound     = 4 // the chain, entry or key does not exist
	exitStorage      = 5 // the ledger cannot be read or written: locked, corrupt, missing, I/O
)

// JSON error codes (the "code" of {"error":{…}} on stderr): internal/errcode
// names them, the same as the HTTP API's problem codes.
const (
	codeVerification = errcode.Verification
	codeUsage        = errcode.Usage
	codeInvalidInput = errcode.InvalidInput
	codeConflict     = errcode.Conflict
	codeNotFound     = errcode.NotFound
	codeLocked       = errcode.Locked
	codeCorrupt      = errcode.Corrupt
	codeStorage      = errcode.Storage
	codeCanceled     = errcode.Canceled
	codeProofRefused = errcode.ProofRefused
	codeTreeBehind   = errcode.TreeBehind
	codeIncomplete   = errcode.Incomplete
)

// exitCodes maps each JSON code to its exit code.
var exitCodes = map[string]int{
	codeVerification: exitVerification, codeUsage: exitUsage, codeInvalidInput: exitUsage,
	codeConflict: exitConflict, codeNotFound: exitNotFound, codeLocked: exitStorage, codeCorrupt: exitStorage,
	codeStorage: exitStorage, codeCanceled: exitStorage, codeProofRefused: exitVerification,
	codeTreeBehind: exitStorage, codeIncomplete: exitStorage,
}

var (
	// errVerificationFailed: verify (or import's check of its file) found
	// failures; they have been printed on stdout.
	errVerificationFailed = errors.New("verification failed")

	// errLedgerMissing: the ledger file does not exist and the command does
	// not create one.
	errLedgerMissing = errors.New("ledger does not exist")

	// errInvalidInput: an input the user gave (a file to read, a saved head,
	// an import that does not continue the ledger) is not acceptable.
	errInvalidInput = errors.New("invalid input")
)

// usageError is an argument or flag that cannot be parsed.
type usageError struct{ err error }

func (e *usageError) Error() string { return e.err.Error() }
func (e *usageError) Unwrap() error { return e.err }

// usageErrorf returns a usage error (exit 2).
func usageErrorf(format string, args ...any) error {
	return &usageError{err: fmt.Errorf(format, args...)}
}

// invalidInputf returns an error about the user's input (exit 2). The
// format may wrap a cause with %w.
func invalidInputf(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{errInvalidInput}, args...)...)
}

// classify maps an error to its exit code and JSON code (errcode.Of, with
// the command line's own classes).
func classify(err error) (exitCode int, code string) {
	code = errcode.Of(err, errcode.Local{
		Verification: errVerificationFailed,
		Usage: func(err error) bool {
			var usage *usageError
			return errors.As(err, &usage)
		},
		Input:   errInvalidInput,
		Missing: errLedgerMissing,
	})
	return exitCodes[code], code
}

// errorJSON is the shape of an error on stderr with -o json.
type errorJSON struct {
	Error errorBodyJSON `json:"error"`
}

type errorBodyJSON struct {
	Code    string `json:"code"`
	Message string `json:"message"`
	// ExistingSeq names the entry that holds a conflicting idempotency key.
	ExistingSeq uint64 `json:"existing_seq,omitempty"`
}

// reportError prints err on stderr and returns its exit code.
func reportError(stderr io.Writer, asJSON bool, err error) int {
	exitCode, code := classify(err)
	message := oneLine(err.Error())
	if !asJSON {
		fmt.Fprintf(stderr, "ledgerctl: %s\n", message)
		return exitCode
	}
	body := errorBodyJSON{Code: code, Message: message}
	body.ExistingSeq = existingSeq(err)
	if writeJSON(stderr, errorJSON{Error: body}) != nil {
		fmt.Fprintf(stderr, "ledgerctl: %s\n", message)
	}
	return exitCode
}

// existingSeq returns the seq of the entry that holds a conflicting
// idempotency key (or operation id), or 0.
func existingSeq(err error) uint64 { return errcode.ExistingSeq(err) }

// oneLine keeps an error message on one line of stderr.
func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}

// isNotFound reports whether err says a chain, entry or key does not exist.
func isNotFound(err error) bool { return errors.Is(err, chain.ErrNotFound) }
