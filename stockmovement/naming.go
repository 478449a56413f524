package stockmovement

import (
	"encoding/binary"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/ledgerworks/ledger/chain"
)

// Domain is the chain name component and state key prefix of this package.
const Domain = "stock"

// catalogPart names each tenant's catalog chain, which records item and
// location definitions. It has one component after the domain, movement
// chains have two, so no item or location id can make a movement chain
// collide with it.
const catalogPart = "catalog"

// MovementChain returns the chain that records the movements of one item at
// one location: tenant/stock/item/location. Ids may not contain "/", so two
// different (tenant, item, location) triples never share a chain.
func MovementChain(tenant, item, location string) (string, error) {
	if err := validateIDs(tenant, item, location); err != nil {
		return "", err
	}
	return chain.ScopedName(tenant, Domain, item, location)
}

// CatalogChain returns the chain that records a tenant's item and location
// definitions: tenant/stock/catalog.
func CatalogChain(tenant string) (string, error) {
	if err := validateIDs(tenant); err != nil {
		return "", err
	}
	return chain.ScopedName(tenant, Domain, catalogPart)
}

// ItemLockChain returns the chain whose head a movement of the item locks
// before it reads the item's balances and total: tenant/stock/item. No
// entry is ever appended to it; on PostgreSQL locking it takes a
// placeholder row that is never committed. Its name is a prefix of the
// item's movement chains, so locking it first keeps the lock order
// ascending. (An item named "catalog" shares it with the catalog chain:
// the two are only ever locked, never written, under this name, which
// costs contention and nothing else.)
func ItemLockChain(tenant, item string) (string, error) {
	if err := validateIDs(tenant, item); err != nil {
		return "", err
	}
	return chain.ScopedName(tenant, Domain, item)
}

// ParseMovementChain splits a movement chain id into its tenant, item and
// location; ok is false for any other chain.
func ParseMovementChain(name string) (tenant, item, location string, ok bool) {
	parts := chain.SplitScopedName(name)
	if len(parts) != 4 || parts[1] != Domain {
		return "", "", "", false
	}
	if validateIDs(parts[0], parts[2], parts[3]) != nil {
		return "", "", "", false
	}
	return parts[0], parts[2], parts[3], true
}

// validateIDs checks tenant, item and location ids as chain name components.
func validateIDs(ids ...string) error {
	for _, id := range ids {
		if err := validateID(id); err != nil {
			return err
		}
	}
	return nil
}

func validateID(id string) error {
	switch {
	case id == "":
		return newError("name", ErrInvalidName, "empty id")
	case len(id) > IDLengthMax:
		return newError("name", ErrInvalidName, "id of %d bytes exceeds %d", len(id), IDLengthMax)
	case strings.Contains(id, chain.NameSeparator):
		return newError("name", ErrInvalidName, "id %q contains %q", id, chain.NameSeparator)
	}
	if err := checkText(id); err != "" {
		return newError("name", ErrInvalidName, "id %q %s", id, err)
	}
	return nil
}

// checkText returns why s is not acceptable text, or "" when it is: text is
// valid UTF-8 without control characters, so that it prints safely in one
// line of a terminal or a log.
func checkText(s string) string {
	if !utf8.ValidString(s) {
		return "is not valid UTF-8"
	}
	for i, r := range s {
		if unicode.IsControl(r) {
			return fmt.Sprintf("has control character %U at byte %d", r, i)
		}
	}
	return ""
}

// validateText checks an optional text field against its limit.
func validateText(op, field, s string, lengthMax int) error {
	if len(s) > lengthMax {
		return newError(op, ErrInvalidText, "%s of %d bytes exceeds %d", field, len(s), lengthMax)
	}
	if why := checkText(s); why != "" {
		return newError(op, ErrInvalidText, "%s %s", field, why)
	}
	return nil
}

// validateKey checks a movement's idempotency key.
func validateKey(op, key string) error {
	switch {
	case key == "":
		return newError(op, ErrInvalidKey, "missing")
	case len(key) > KeyLengthMax:
		return newError(op, ErrInvalidKey, "key of %d bytes exceeds %d", len(key), KeyLengthMax)
	}
	if why := checkText(key); why != "" {
		return newError(op, ErrInvalidKey, "key %q %s", key, why)
	}
	return nil
}

// State keys. Every key starts with "stock/" and the tenant; ids contain no
// "/", so the layout below is unambiguous:
//
//	stock/<tenant>/item/<item>                         definition
//	stock/<tenant>/location/<location>                 definition
//	stock/<tenant>/balance/<item>/<location>           balance and last seq
//	stock/<tenant>/total/<item>                        total over locations
//	stock/<tenant>/reversed/<item>/<location>/<seq>    seq of the reversal
//
// <seq> is 8 bytes big-endian, so a tenant's markers sort by seq.
const (
	stateItem     = "item"
	stateLocation = "location"
	stateBalance  = "balance"
	stateTotal    = "total"
	stateReversed = "reversed"
)

func stateKey(tenant, kind string, parts ...string) []byte {
	key := make([]byte, 0, 64)
	key = append(key, Domain+"/"...)
	key = append(key, tenant...)
	key = append(key, '/')
	key = append(key, kind...)
	for _, p := range parts {
		key = append(key, '/')
		key = append(key, p...)
	}
	return key
}

// statePrefix returns the prefix shared by the keys of one kind, with the
// given leading parts, and the end of its range.
func statePrefix(tenant, kind string, parts ...string) (start, end []byte) {
	start = append(stateKey(tenant, kind, parts...), '/')
	return start, prefixEnd(start)
}

// prefixEnd returns the smallest key greater than every key with the prefix.
// Prefixes here end in "/", which is not 0xff, so incrementing it suffices.
func prefixEnd(prefix []byte) []byte {
	end := append([]byte(nil), prefix...)
	end[len(end)-1]++
	return end
}

func reversedKey(tenant, item, location string, seq uint64) []byte {
	key := append(stateKey(tenant, stateReversed, item, location), '/')
	return binary.BigEndian.AppendUint64(key, seq)
}

// parseStateKey splits a state key of this package into tenant, kind and the
// remaining parts (for reversal markers, the last part is the 8-byte seq).
func parseStateKey(key []byte) (tenant, kind string, parts []string, ok bool) {
	rest, found := strings.CutPrefix(string(key), Domain+"/")
	if !found {
		return "", "", nil, false
	}
	tenant, rest, found = strings.Cut(rest, "/")
	if !found {
		return "", "", nil, false
	}
	kind, rest, _ = strings.Cut(rest, "/")
	if kind == stateReversed {
		item, rest, found1 := strings.Cut(rest, "/")
		location, seq, found2 := strings.Cut(rest, "/")
		if !found1 || !found2 || len(seq) != 8 {
			return "", "", nil, false
		}
		return tenant, kind, []string{item, location, seq}, true
	}
	return tenant, kind, strings.Split(rest, "/"), true
}
