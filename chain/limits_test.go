package chain_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/ledgerworks/ledger/chain"
)

// payloadSizeMaxTest keeps the payload limit tests small and fast.
const payloadSizeMaxTest = 1024

type badRequest struct {
	name     string
	req      chain.Request
	sentinel error
	field    string
}

// with returns a good request changed by edit.
func with(edit func(r *chain.Request)) chain.Request {
	r := chain.Request{Chain: "c", IdempotencyKey: "k", Type: "t/v1", Payload: []byte("p")}
	edit(&r)
	return r
}

func badRequests() []badRequest {
	return append([]badRequest{
		{"chain empty", with(func(r *chain.Request) { r.Chain = "" }), chain.ErrInvalidChain, "chain"},
		{"chain 257 bytes", with(func(r *chain.Request) { r.Chain = strings.Repeat("c", 257) }), chain.ErrInvalidChain, "chain"},
		{"chain 258 bytes of 2-byte runes", with(func(r *chain.Request) { r.Chain = strings.Repeat("é", 129) }), chain.ErrInvalidChain, "chain"},
		{"chain invalid UTF-8", with(func(r *chain.Request) { r.Chain = "c\xff" }), chain.ErrInvalidChain, "chain"},
		{"chain truncated rune", with(func(r *chain.Request) { r.Chain = "\xc3" }), chain.ErrInvalidChain, "chain"},
		{"chain newline", with(func(r *chain.Request) { r.Chain = "c\n" }), chain.ErrInvalidChain, "chain"},
		{"chain NUL", with(func(r *chain.Request) { r.Chain = "a\x00b" }), chain.ErrInvalidChain, "chain"},
		{"chain DEL", with(func(r *chain.Request) { r.Chain = "a\x7f" }), chain.ErrInvalidChain, "chain"},
		{"chain C1 control", with(func(r *chain.Request) { r.Chain = "a\u0085" }), chain.ErrInvalidChain, "chain"},
		{"key 257 bytes", with(func(r *chain.Request) { r.IdempotencyKey = strings.Repeat("k", 257) }), chain.ErrInvalidKey, "idempotency_key"},
		{"key invalid UTF-8", with(func(r *chain.Request) { r.IdempotencyKey = "\xfe\xff" }), chain.ErrInvalidKey, "idempotency_key"},
		{"key tab", with(func(r *chain.Request) { r.IdempotencyKey = "k\t1" }), chain.ErrInvalidKey, "idempotency_key"},
		{"type empty", with(func(r *chain.Request) { r.Type = "" }), chain.ErrInvalidType, "type"},
		{"type 65 bytes", with(func(r *chain.Request) { r.Type = strings.Repeat("t", 65) }), chain.ErrInvalidType, "type"},
		{"type invalid UTF-8", with(func(r *chain.Request) { r.Type = "t\x80" }), chain.ErrInvalidType, "type"},
		{"type carriage return", with(func(r *chain.Request) { r.Type = "t\r" }), chain.ErrInvalidType, "type"},
		{"payload one byte too large", with(func(r *chain.Request) { r.Payload = make([]byte, payloadSizeMaxTest+1) }), chain.ErrPayloadTooLarge, "payload"},
	}, unsafeNameRequests()...)
}

// unsafeNameRequests are requests within the limits whose names the rules
// for new names refuse.
func unsafeNameRequests() []badRequest {
	return []badRequest{
		{"chain ..", with(func(r *chain.Request) { r.Chain = ".." }), chain.ErrInvalidChain, "chain"},
		{"chain .", with(func(r *chain.Request) { r.Chain = "." }), chain.ErrInvalidChain, "chain"},
		{"chain /", with(func(r *chain.Request) { r.Chain = "/" }), chain.ErrInvalidChain, "chain"},
		{"chain leading /", with(func(r *chain.Request) { r.Chain = "/etc/passwd" }), chain.ErrInvalidChain, "chain"},
		{"chain trailing /", with(func(r *chain.Request) { r.Chain = "acme/" }), chain.ErrInvalidChain, "chain"},
		{"chain empty component", with(func(r *chain.Request) { r.Chain = "acme//x" }), chain.ErrInvalidChain, "chain"},
		{"chain .. component", with(func(r *chain.Request) { r.Chain = "acme/../globex" }), chain.ErrInvalidChain, "chain"},
		{"chain . component", with(func(r *chain.Request) { r.Chain = "acme/./x" }), chain.ErrInvalidChain, "chain"},
		{"chain right-to-left override", with(func(r *chain.Request) { r.Chain = "acme/\u202egpj.exe" }), chain.ErrInvalidChain, "chain"},
		{"chain zero-width space", with(func(r *chain.Request) { r.Chain = "ac\u200bme/x" }), chain.ErrInvalidChain, "chain"},
		{"chain byte order mark", with(func(r *chain.Request) { r.Chain = "\ufeffacme" }), chain.ErrInvalidChain, "chain"},
		{"key left-to-right isolate", with(func(r *chain.Request) { r.IdempotencyKey = "order-\u20661" }), chain.ErrInvalidKey, "idempotency_key"},
		{"key soft hyphen", with(func(r *chain.Request) { r.IdempotencyKey = "or\u00adder" }), chain.ErrInvalidKey, "idempotency_key"},
		{"type right-to-left mark", with(func(r *chain.Request) { r.Type = "t\u200f/v1" }), chain.ErrInvalidType, "type"},
		{"type tag character", with(func(r *chain.Request) { r.Type = "t\U000e0041" }), chain.ErrInvalidType, "type"},
	}
}

func TestValidateRequestRefusesEachLimit(t *testing.T) {
	for _, bad := range badRequests() {
		t.Run(bad.name, func(t *testing.T) {
			assertInvalid(t, chain.ValidateRequest(bad.req, payloadSizeMaxTest), bad.sentinel, bad.field)
		})
	}
}

// TestUnsafeNamesAreTheirOwnClass: the names refused by the rules for new
// names match ErrUnsafeName beside their field's sentinel, the limits'
// refusals do not, and ValidateStoredRequest, which checks what a ledger
// already holds, accepts exactly the former.
func TestUnsafeNamesAreTheirOwnClass(t *testing.T) {
	unsafe := map[string]bool{}
	for _, bad := range unsafeNameRequests() {
		unsafe[bad.name] = true
	}
	for _, bad := range badRequests() {
		err := chain.ValidateRequest(bad.req, payloadSizeMaxTest)
		if got := errors.Is(err, chain.ErrUnsafeName); got != unsafe[bad.name] {
			t.Errorf("%s: %v matches ErrUnsafeName %v, want %v", bad.name, err, got, unsafe[bad.name])
		}
		if stored := chain.ValidateStoredRequest(bad.req, payloadSizeMaxTest); (stored == nil) != unsafe[bad.name] {
			t.Errorf("%s: ValidateStoredRequest = %v", bad.name, stored)
		}
	}
}

func TestValidateRequestAcceptsTheBoundaries(t *testing.T) {
	for name, req := range map[string]chain.Request{
		"longest chain":                  {Chain: strings.Repeat("c", chain.ChainLengthMax), Type: "t"},
		"longest chain of 2-byte runes":  {Chain: strings.Repeat("é", chain.ChainLengthMax/2), Type: "t"},
		"longest key":                    {Chain: "c", IdempotencyKey: strings.Repeat("k", chain.IdempotencyKeyLengthMax), Type: "t"},
		"longest type":                   {Chain: "c", Type: strings.Repeat("t", chain.TypeLengthMax)},
		"largest payload":                {Chain: "c", Type: "t", Payload: make([]byte, payloadSizeMaxTest)},
		"empty key and payload":          {Chain: "c", Type: "t"},
		"4-byte runes, spaces and slash": {Chain: "tenant/😀 x", IdempotencyKey: "ключ 1", Type: "類型/v1"},
	} {
		if err := chain.ValidateRequest(req, payloadSizeMaxTest); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
}

func TestValidateRequestDefaultPayloadLimit(t *testing.T) {
	req := chain.Request{Chain: "c", Type: "t", Payload: make([]byte, chain.PayloadSizeMaxDefault)}
	if err := chain.ValidateRequest(req, 0); err != nil {
		t.Fatalf("payload of PayloadSizeMaxDefault bytes: %v", err)
	}
	req.Payload = append(req.Payload, 0)
	assertInvalid(t, chain.ValidateRequest(req, 0), chain.ErrPayloadTooLarge, "payload")
}

func TestValidateChain(t *testing.T) {
	if err := chain.ValidateChain(strings.Repeat("c", chain.ChainLengthMax)); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []string{"", strings.Repeat("c", chain.ChainLengthMax+1), "\xff", "a\nb"} {
		assertInvalid(t, chain.ValidateChain(bad), chain.ErrInvalidChain, "chain")
	}
}

// TestBadRequestsWriteNothing sends every bad request through Append and
// through Tx.Append inside Update, on a ledger that already holds entries
// with the same chain and key, and checks that nothing changed.
func TestBadRequestsWriteNothing(t *testing.T) {
	forEachBackend(t, chain.Options{PayloadSizeMax: payloadSizeMaxTest}, func(t *testing.T, db *chain.DB) {
		ctx := context.Background()
		mustAppend(t, db, chain.Request{Chain: "c", IdempotencyKey: "k", Type: "t/v1", Payload: []byte("p")})
		mustAppend(t, db, chain.Request{Chain: "other", Type: "t/v1"})
		before := takeSnapshot(t, db)
		for _, bad := range badRequests() {
			_, err := db.Append(ctx, bad.req)
			assertInvalid(t, err, bad.sentinel, bad.field)
			assertUnchanged(t, db, before)

			// Inside Update, after a good append: the whole Update fails.
			err = db.Update(ctx, func(tx *chain.Tx) error {
				if _, err := tx.Append(chain.Request{Chain: "other", Type: "t/v1", Payload: []byte("first")}); err != nil {
					return err
				}
				_, err := tx.Append(bad.req)
				return err
			})
			assertInvalid(t, err, bad.sentinel, bad.field)
			assertUnchanged(t, db, before)
		}
		assertVerifies(t, db)
	})
}

func TestOpenRefusesPayloadSizeMaxAboveLimit(t *testing.T) {
	for _, size := range []int{-1, chain.PayloadSizeLimit + 1} {
		db, err := chain.Open(t.TempDir()+"/l.db", chain.Options{PayloadSizeMax: size})
		if err == nil {
			db.Close()
			t.Fatalf("PayloadSizeMax %d accepted", size)
		}
	}
	db, err := chain.Open(t.TempDir()+"/l.db", chain.Options{PayloadSizeMax: chain.PayloadSizeLimit})
	if err != nil {
		t.Fatalf("PayloadSizeMax = PayloadSizeLimit: %v", err)
	}
	db.Close()
}

func TestConfiguredPayloadLimitApplies(t *testing.T) {
	db, _ := openFile(t, chain.Options{PayloadSizeMax: 10})
	ctx := context.Background()
	if _, err := db.Append(ctx, chain.Request{Chain: "c", Type: "t", Payload: make([]byte, 10)}); err != nil {
		t.Fatal(err)
	}
	_, err := db.Append(ctx, chain.Request{Chain: "c", Type: "t", Payload: make([]byte, 11)})
	if !errors.Is(err, chain.ErrPayloadTooLarge) || !errors.Is(err, chain.ErrInvalid) {
		t.Fatalf("11-byte payload: %v", err)
	}
	if h, err := db.Head(ctx, "c"); err != nil || h.Seq != 1 {
		t.Fatalf("head %+v %v", h, err)
	}
}
