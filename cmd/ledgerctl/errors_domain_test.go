package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/ledgerworks/ledger/chain"
	"github.com/ledgerworks/ledger/decimal"
	"github.com/ledgerworks/ledger/financial"
	"github.com/ledgerworks/ledger/stockmovement"
	"github.com/ledgerworks/ledger/valuations"
)

// domainErrorCase is a domain package's sentinel as that package returns
// it (inside its error type, with its class) and where ledgerctl maps it.
type domainErrorCase struct {
	name string // package.Sentinel, as declared in the package's errors.go
	err  error
	exit int
	code string
}

// domainErrorCases lists every sentinel of financial, stockmovement and
// valuations. TestDomainSentinelsAreAllMapped fails when a package declares
// one that is missing here.
func domainErrorCases() []domainErrorCase {
	fin := func(sentinel, class error) error {
		return fmt.Errorf("fin post: %w", &financial.Error{Err: sentinel, Class: class, Detail: "detail"})
	}
	stock := func(sentinel error) error {
		return fmt.Errorf("stock receive: %w", &stockmovement.Error{Op: "receive", Err: sentinel, Detail: "detail"})
	}
	val := func(sentinel, class error) error {
		return fmt.Errorf("val receive: %w", &valuations.Error{Err: sentinel, Class: class, Detail: "detail"})
	}
	input := func(name string, err error) domainErrorCase {
		return domainErrorCase{name, err, exitUsage, codeInvalidInput}
	}
	notFound := func(name string, err error) domainErrorCase {
		return domainErrorCase{name, err, exitNotFound, codeNotFound}
	}
	invalid, missing := chain.ErrInvalid, chain.ErrNotFound
	return []domainErrorCase{
		input("financial.ErrInvalidBook", fin(financial.ErrInvalidBook, invalid)),
		input("financial.ErrInvalidAccount", fin(financial.ErrInvalidAccount, invalid)),
		input("financial.ErrInvalidCurrency", fin(financial.ErrInvalidCurrency, invalid)),
		input("financial.ErrInvalidDate", fin(financial.ErrInvalidDate, invalid)),
		input("financial.ErrInvalidPosting", fin(financial.ErrInvalidPosting, invalid)),
		input("financial.ErrAmount", fin(financial.ErrAmount, invalid)),
		input("financial.ErrExponent", fin(financial.ErrExponent, invalid)),
		input("financial.ErrUnbalanced", fin(financial.ErrUnbalanced, invalid)),
		input("financial.ErrOverflow", fin(financial.ErrOverflow, invalid)),
		// A posting line naming an undefined account is bad input; a
		// lookup of one is not found.
		input("financial.ErrAccountNotFound", fin(financial.ErrAccountNotFound, invalid)),
		notFound("financial.ErrAccountNotFound", fin(financial.ErrAccountNotFound, missing)),
		input("financial.ErrAccountClosed", fin(financial.ErrAccountClosed, invalid)),
		input("financial.ErrCurrencyNotFound", fin(financial.ErrCurrencyNotFound, invalid)),
		notFound("financial.ErrCurrencyNotFound", fin(financial.ErrCurrencyNotFound, missing)),
		notFound("financial.ErrPostingNotFound", fin(financial.ErrPostingNotFound, missing)),
		input("financial.ErrNotReversible", fin(financial.ErrNotReversible, invalid)),
		{"financial.ErrPayload", fin(financial.ErrPayload, chain.ErrCorrupt), exitStorage, codeCorrupt},

		input("stockmovement.ErrInvalidName", stock(stockmovement.ErrInvalidName)),
		input("stockmovement.ErrInvalidKey", stock(stockmovement.ErrInvalidKey)),
		input("stockmovement.ErrInvalidText", stock(stockmovement.ErrInvalidText)),
		input("stockmovement.ErrMissingReason", stock(stockmovement.ErrMissingReason)),
		input("stockmovement.ErrInvalidScale", stock(stockmovement.ErrInvalidScale)),
		input("stockmovement.ErrScaleMismatch", stock(stockmovement.ErrScaleMismatch)),
		input("stockmovement.ErrScaleChange", stock(stockmovement.ErrScaleChange)),
		input("stockmovement.ErrZeroQuantity", stock(stockmovement.ErrZeroQuantity)),
		input("stockmovement.ErrNegativeQuantity", stock(stockmovement.ErrNegativeQuantity)),
		input("stockmovement.ErrOverflow", stock(stockmovement.ErrOverflow)),
		input("stockmovement.ErrNegativeStock", fmt.Errorf("stock issue: %w", &stockmovement.InsufficientStockError{
			Op: "issue", Item: "SKU-1", Location: "WH-1", Balance: decimal.MustNew(1, 0), Change: decimal.MustNew(-2, 0), Shortfall: decimal.MustNew(1, 0)})),
		input("stockmovement.ErrSameLocation", stock(stockmovement.ErrSameLocation)),
		input("stockmovement.ErrInvalidReference", stock(stockmovement.ErrInvalidReference)),
		input("stockmovement.ErrCrossTenant", stock(stockmovement.ErrCrossTenant)),
		input("stockmovement.ErrNotReversible", stock(stockmovement.ErrNotReversible)),
		input("stockmovement.ErrAlreadyReversed", stock(stockmovement.ErrAlreadyReversed)),
		notFound("stockmovement.ErrItemNotFound", stock(stockmovement.ErrItemNotFound)),
		notFound("stockmovement.ErrLocationNotFound", stock(stockmovement.ErrLocationNotFound)),
		notFound("stockmovement.ErrMovementNotFound", stock(stockmovement.ErrMovementNotFound)),
		notFound("stockmovement.ErrSeqBeyondHead", stock(stockmovement.ErrSeqBeyondHead)),
		{"stockmovement.ErrMalformed", stock(stockmovement.ErrMalformed), exitStorage, codeCorrupt},
		{"stockmovement.ErrIncompleteTransfer", stock(stockmovement.ErrIncompleteTransfer), exitStorage, codeCorrupt},

		input("valuations.ErrInvalidItem", val(valuations.ErrInvalidItem, invalid)),
		input("valuations.ErrInvalidOperation", val(valuations.ErrInvalidOperation, invalid)),
		input("valuations.ErrScale", val(valuations.ErrScale, invalid)),
		input("valuations.ErrZeroQuantity", val(valuations.ErrZeroQuantity, invalid)),
		input("valuations.ErrNegativeAmount", val(valuations.ErrNegativeAmount, invalid)),
		input("valuations.ErrOverflow", val(valuations.ErrOverflow, invalid)),
		input("valuations.ErrInvalidPayload", val(valuations.ErrInvalidPayload, invalid)),
		input("valuations.ErrInsufficientStock", val(valuations.ErrInsufficientStock, invalid)),
		input("valuations.ErrNoRate", val(valuations.ErrNoRate, invalid)),
		input("valuations.ErrNegativeValue", val(valuations.ErrNegativeValue, invalid)),
		input("valuations.ErrNoStock", val(valuations.ErrNoStock, invalid)),
		input("valuations.ErrMethodChange", val(valuations.ErrMethodChange, invalid)),
		input("valuations.ErrNotReversible", val(valuations.ErrNotReversible, invalid)),
		input("valuations.ErrAlreadyReversed", val(valuations.ErrAlreadyReversed, invalid)),
		input("valuations.ErrPendingLimit", val(valuations.ErrPendingLimit, invalid)),
		notFound("valuations.ErrUnknownItem", val(valuations.ErrUnknownItem, missing)),
		notFound("valuations.ErrUnknownOperation", val(valuations.ErrUnknownOperation, missing)),
		{"valuations.ErrOperationConflict", fmt.Errorf("val receive: %w", &valuations.ConflictError{
			OperationID: "grn-1", Chain: "c", Key: "grn-1:qty", ExistingSeq: 3}), exitConflict, codeConflict},
		{"valuations.ErrIncomplete", fmt.Errorf("val receive: %w", &valuations.IncompleteError{
			Chain: "c", Seq: 4, Reason: "half-written operations \"a\" and \"b\" interleave"}), exitStorage, codeIncomplete},
		// The entry it could not apply failed the package's input checks:
		// still the ledger's problem, not the caller's.
		{"valuations.ErrIncomplete", fmt.Errorf("val receive: %w", &valuations.IncompleteError{
			Chain: "c", Seq: 4, Reason: "not a valuation entry of this item",
			Err: val(valuations.ErrInvalidPayload, invalid)}), exitStorage, codeIncomplete},
	}
}

func TestDomainErrorsMapToExitCodes(t *testing.T) {
	t.Parallel()
	for _, c := range domainErrorCases() {
		exit, code := classify(c.err)
		if exit != c.exit || code != c.code {
			t.Errorf("%s (%v): exit %d code %s, want exit %d code %s", c.name, c.err, exit, code, c.exit, c.code)
		}
		var text, asJSON bytes.Buffer
		if got := reportError(&text, false, c.err); got != c.exit || strings.Count(text.String(), "\n") != 1 {
			t.Errorf("%s: text report %q exit %d", c.name, text.String(), got)
		}
		reportError(&asJSON, true, c.err)
		var e errorJSON
		if err := json.Unmarshal(asJSON.Bytes(), &e); err != nil || e.Error.Code != c.code || e.Error.Message == "" {
			t.Errorf("%s: JSON report %q: %v", c.name, asJSON.String(), err)
		}
		if c.code == codeConflict && e.Error.ExistingSeq != 3 {
			t.Errorf("%s: JSON report %q lacks existing_seq 3", c.name, asJSON.String())
		}
	}
}

// TestDomainSentinelsAreAllMapped reads the domain packages' errors.go and
// fails for any exported Err… variable domainErrorCases does not list.
func TestDomainSentinelsAreAllMapped(t *testing.T) {
	t.Parallel()
	listed := map[string]bool{}
	for _, c := range domainErrorCases() {
		listed[c.name] = true
	}
	var declared []string
	for _, pkg := range []string{"financial", "stockmovement", "valuations"} {
		file, err := parser.ParseFile(token.NewFileSet(), filepath.Join("..", "..", pkg, "errors.go"), nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, decl := range file.Decls {
			gen, ok := decl.(*ast.GenDecl)
			if !ok || gen.Tok != token.VAR {
				continue
			}
			for _, spec := range gen.Specs {
				for _, name := range spec.(*ast.ValueSpec).Names {
					if name.IsExported() && strings.HasPrefix(name.Name, "Err") {
						declared = append(declared, pkg+"."+name.Name)
					}
				}
			}
		}
	}
	if len(declared) < 50 {
		t.Fatalf("found only %d sentinels in the domain packages: %v", len(declared), declared)
	}
	sort.Strings(declared)
	for _, name := range declared {
		if !listed[name] {
			t.Errorf("%s has no case in domainErrorCases: decide its exit code and JSON code", name)
		}
		delete(listed, name)
	}
	for name := range listed {
		t.Errorf("domainErrorCases lists %s, which its package no longer declares", name)
	}
}
