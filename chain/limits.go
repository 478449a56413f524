package chain

import (
	"fmt"
	"unicode"
	"unicode/utf8"
	"unsafe"
)

// Limits checked on every request before anything is written.
const (
	// ChainLengthMax is the longest chain id, in bytes.
	ChainLengthMax = 256
	// IdempotencyKeyLengthMax is the longest idempotency key, in bytes.
	IdempotencyKeyLengthMax = 256
	// TypeLengthMax is the longest payload type, in bytes.
	TypeLengthMax = 64
	// PayloadSizeMaxDefault is the payload limit when Options.PayloadSizeMax is zero.
	PayloadSizeMaxDefault = 1 << 20
	// PayloadSizeLimit is the largest PayloadSizeMax that may be configured;
	// the decoder refuses anything longer.
	PayloadSizeLimit = 64 << 20
	// BatchSizeMaxDefault is how many requests one group commit takes at most
	// when Options.BatchSizeMax is zero.
	BatchSizeMaxDefault = 4096
	// FailuresMaxDefault is how many failures Verify collects at most when
	// VerifyOptions.FailuresMax is zero.
	FailuresMaxDefault = 10_000
)

// ValidateRequest checks a new request against the limits and the rules
// for new names (naming.go); payloadSizeMax of zero means
// PayloadSizeMaxDefault. Every append runs it before anything is written.
func ValidateRequest(req Request, payloadSizeMax int) error {
	if err := validateNewChain(req.Chain); err != nil {
		return err
	}
	if err := validateNewText("idempotency_key", req.IdempotencyKey, 0, IdempotencyKeyLengthMax, ErrInvalidKey); err != nil {
		return err
	}
	if err := validateNewText("type", req.Type, 1, TypeLengthMax, ErrInvalidType); err != nil {
		return err
	}
	return validatePayloadSize(len(req.Payload), payloadSizeMax)
}

// ValidateStoredRequest checks the fields of an entry that a ledger or an
// export already holds against the limits alone: length, valid UTF-8, no
// control character. Names from before the rules for new names pass, so
// that such entries still decode, verify and import (Tx.AppendEntry).
func ValidateStoredRequest(req Request, payloadSizeMax int) error {
	if err := ValidateChain(req.Chain); err != nil {
		return err
	}
	if err := validateText("idempotency_key", req.IdempotencyKey, 0, IdempotencyKeyLengthMax, ErrInvalidKey); err != nil {
		return err
	}
	if err := validateText("type", req.Type, 1, TypeLengthMax, ErrInvalidType); err != nil {
		return err
	}
	return validatePayloadSize(len(req.Payload), payloadSizeMax)
}

func validatePayloadSize(size, payloadSizeMax int) error {
	if payloadSizeMax <= 0 {
		payloadSizeMax = PayloadSizeMaxDefault
	}
	if size > payloadSizeMax {
		return &InvalidError{Field: "payload", Err: ErrPayloadTooLarge,
			Reason: fmt.Sprintf("payload of %d bytes exceeds %d", size, payloadSizeMax)}
	}
	return nil
}

// ValidateChain checks a chain id that a ledger may hold, to read it: the
// limits alone, as ValidateStoredRequest.
func ValidateChain(chain string) error {
	return validateText("chain", chain, 1, ChainLengthMax, ErrInvalidChain)
}

func validateText(field, s string, lengthMin, lengthMax int, sentinel error) error {
	// Ids, keys and types are printable ASCII as a rule: valid UTF-8
	// without a control character, checked eight bytes at a time.
	if len(s) >= lengthMin && len(s) <= lengthMax && printableASCII(unsafe.Slice(unsafe.StringData(s), len(s))) {
		return nil
	}
	return validateTextRunes(field, s, lengthMin, lengthMax, sentinel)
}

// validateTextRunes is validateText rune by rune, and the error it returns.
func validateTextRunes(field, s string, lengthMin, lengthMax int, sentinel error) error {
	invalid := func(format string, args ...any) error {
		return &InvalidError{Field: field, Err: sentinel, Reason: fmt.Sprintf(format, args...)}
	}
	if len(s) < lengthMin {
		return invalid("%s is empty", field)
	}
	if len(s) > lengthMax {
		return invalid("%s of %d bytes exceeds %d", field, len(s), lengthMax)
	}
	if !utf8.ValidString(s) {
		return invalid("%s is not valid UTF-8", field)
	}
	for i, r := range s {
		if unicode.IsControl(r) {
			return invalid("%s has control character %U at byte %d", field, r, i)
		}
	}
	return nil
}
