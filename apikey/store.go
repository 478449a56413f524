package apikey

import (
	"bytes"
	"cmp"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"unicode"
	"unicode/utf8"

	"github.com/ledgerworks/ledger/chain"
)

// CreateRequest describes a new key.
type CreateRequest struct {
	// Tenant is the key's tenant: ValidateTenant's rules.
	Tenant string
	// Name is a label for people; empty is allowed.
	Name string
	// Scopes are one to three distinct scopes, in any order.
	Scopes []Scope
	// By, when set, is the id of the key that asks (an API caller's): it
	// must be a valid key of Tenant holding every scope of Scopes, else
	// ErrScopeNotHeld, so that no key can mint a key wider than itself.
	// The operator's command line leaves it empty.
	By string
}

// idDrawsMax bounds the draws of a key id taken already (64 random bits:
// a second draw is already beyond belief).
const idDrawsMax = 4

// Create records a new key on the system chain and returns its record and
// its token. The token is returned only here: the ledger keeps its
// digest, so a lost token cannot be recovered, only revoked and replaced.
func Create(ctx context.Context, db *chain.DB, r CreateRequest) (Key, string, error) {
	var key Key
	var token string
	err := db.Update(ctx, func(tx *chain.Tx) error {
		var err error
		key, token, err = CreateTx(tx, r)
		return err
	})
	if err != nil {
		return Key{}, "", err
	}
	return key, token, nil
}

// CreateTx is Create in the caller's write transaction. The key exists
// exactly when the transaction commits; the token is valid from then on.
func CreateTx(tx *chain.Tx, r CreateRequest) (Key, string, error) {
	scopes, err := normalizeScopes(r.Scopes)
	if err != nil {
		return Key{}, "", err
	}
	if err := ValidateNewTenant(r.Tenant); err != nil {
		return Key{}, "", err
	}
	if err := validateName(r.Name); err != nil {
		return Key{}, "", err
	}
	if err := lockSystemChain(tx); err != nil {
		return Key{}, "", err
	}
	if err := checkHolds(tx, r.By, r.Tenant, scopes, "create a key with"); err != nil {
		return Key{}, "", err
	}
	count, err := keyCount(tx)
	if err != nil {
		return Key{}, "", err
	}
	if count >= KeysMax {
		return Key{}, "", invalid("tenant", ErrTooManyKeys, "the ledger holds %d keys, at most %d", count, KeysMax)
	}
	id, secret, token, err := drawID(tx)
	if err != nil {
		return Key{}, "", err
	}
	p := createPayload{ID: id, Tenant: r.Tenant, Name: r.Name, Scopes: scopes, Digest: digestOf(id, secret[:])}
	res, err := tx.Append(chain.Request{Chain: SystemChain, IdempotencyKey: createKey(id), Type: TypeCreate, Payload: encodeCreate(&p)})
	if err != nil {
		return Key{}, "", err
	}
	if res.Replayed {
		return Key{}, "", fmt.Errorf("%w: key %s is on the system chain (seq %d) but not in the state; run `ledgerctl rebuild-state`",
			chain.ErrCorrupt, id, res.Entry.Seq)
	}
	rec := record{Key: Key{ID: id, Tenant: r.Tenant, Name: r.Name, Scopes: scopes, CreatedUnixNano: res.Entry.TimeUnixNano}, Digest: p.Digest}
	if err := putRecord(tx, &rec); err != nil {
		return Key{}, "", err
	}
	if err := tx.StatePut(tenantKey(r.Tenant, id), []byte{}); err != nil {
		return Key{}, "", err
	}
	if err := tx.StatePut(countKey(), countValue(count+1)); err != nil {
		return Key{}, "", err
	}
	return rec.Key, token, tx.Notify(NotifyChannel)
}

// drawID draws a key id no key has, and its secret.
func drawID(tx *chain.Tx) (string, [SecretSize]byte, string, error) {
	for range idDrawsMax {
		id, secret, token := newSecret()
		_, err := tx.StateGet(recordKey(id))
		if isNotFound(err) {
			return id, secret, token, nil
		}
		if err != nil {
			return "", secret, "", err
		}
	}
	panic("apikey: crypto/rand drew taken key ids again and again")
}

// lockSystemChain reads the system chain's head, which in a write
// transaction locks it (on PostgreSQL) until the transaction ends: key
// changes serialize, so a revocation reads the record it replaces.
func lockSystemChain(tx *chain.Tx) error {
	if _, err := tx.Head(SystemChain); err != nil && !isNotFound(err) {
		return err
	}
	return nil
}

// keyCount reads how many keys exist.
func keyCount(tx *chain.Tx) (int, error) {
	v, err := tx.StateGet(countKey())
	if isNotFound(err) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	if len(v) != 8 || binary.BigEndian.Uint64(v) > KeysMax {
		return 0, fmt.Errorf("%w: apikey key count %x", chain.ErrCorrupt, v)
	}
	return int(binary.BigEndian.Uint64(v)), nil
}

// countValue encodes the key count.
func countValue(n int) []byte { return binary.BigEndian.AppendUint64(nil, uint64(n)) }

func putRecord(tx *chain.Tx, r *record) error {
	return tx.StatePut(recordKey(r.Key.ID), encodeRecord(r))
}

// getRecord reads a key's state record; ErrUnknownKey when there is none.
func getRecord(tx *chain.Tx, id string) (record, error) {
	v, err := tx.StateGet(recordKey(id))
	if isNotFound(err) {
		return record{}, invalid("id", ErrUnknownKey, "no key has id %q", id)
	}
	if err != nil {
		return record{}, err
	}
	r, err := decodeRecord(v)
	if err != nil || r.Key.ID != id {
		return record{}, fmt.Errorf("%w: apikey record of %s: %v", chain.ErrCorrupt, id, err)
	}
	return r, nil
}

// checkHolds refuses with ErrScopeNotHeld unless by is empty or a valid
// key of tenant that holds every scope of scopes; what names the act.
func checkHolds(tx *chain.Tx, by, tenant string, scopes []Scope, what string) error {
	if by == "" {
		return nil
	}
	if err := ValidateID(by); err != nil {
		return err
	}
	rec, err := getRecord(tx, by)
	if errors.Is(err, ErrUnknownKey) {
		return invalid("by", ErrScopeNotHeld, "the asking key %s does not exist", by)
	}
	if err != nil {
		return err
	}
	if rec.Key.Revoked() || rec.Key.Tenant != tenant {
		return invalid("by", ErrScopeNotHeld, "the asking key %s is revoked or of another tenant", by)
	}
	for _, sc := range scopes {
		if !rec.Key.Has(sc) {
			return invalid("scopes", ErrScopeNotHeld, "a key without the %s scope cannot %s it", sc, what)
		}
	}
	return nil
}

// RevokeRequest names a key to revoke.
type RevokeRequest struct {
	// Tenant, when set, is the tenant the key must belong to: a key of
	// another tenant is ErrUnknownKey, as if it did not exist.
	Tenant string
	ID     string
	// Reason is recorded with the revocation; empty is allowed.
	Reason string
	// By, when set, is the id of the key that asks: it must be a valid key
	// of the revoked key's tenant holding every scope the revoked key
	// holds, else ErrScopeNotHeld, so that a narrower key cannot revoke a
	// wider one (the operator's first key among them).
	By string
}

// Revoke records the revocation of a key on the system chain and returns
// its record. Revoking a revoked key writes nothing and returns the
// record of its first revocation. Authenticators of this DB refuse the key
// at their next call; those of other processes within their
// RevocationDelay.
func Revoke(ctx context.Context, db *chain.DB, id, reason string) (Key, error) {
	return RevokeIn(ctx, db, RevokeRequest{ID: id, Reason: reason})
}

// RevokeIn is Revoke of a key that must belong to r.Tenant when set.
func RevokeIn(ctx context.Context, db *chain.DB, r RevokeRequest) (Key, error) {
	var key Key
	err := db.Update(ctx, func(tx *chain.Tx) error {
		var err error
		key, err = RevokeTx(tx, r)
		return err
	})
	if err != nil {
		return Key{}, err
	}
	return key, nil
}

// RevokeTx is Revoke in the caller's write transaction.
func RevokeTx(tx *chain.Tx, r RevokeRequest) (Key, error) {
	if err := ValidateID(r.ID); err != nil {
		return Key{}, err
	}
	if err := validateReason(r.Reason); err != nil {
		return Key{}, err
	}
	if err := lockSystemChain(tx); err != nil {
		return Key{}, err
	}
	rec, err := getRecord(tx, r.ID)
	if err != nil {
		return Key{}, err
	}
	if r.Tenant != "" && rec.Key.Tenant != r.Tenant {
		return Key{}, invalid("id", ErrUnknownKey, "no key has id %q", r.ID)
	}
	if err := checkHolds(tx, r.By, rec.Key.Tenant, rec.Key.Scopes, "revoke a key with"); err != nil {
		return Key{}, err
	}
	if rec.Key.Revoked() {
		return rec.Key, nil
	}
	p := revokePayload{ID: r.ID, Reason: r.Reason}
	res, err := tx.Append(chain.Request{Chain: SystemChain, IdempotencyKey: revokeKey(r.ID), Type: TypeRevoke, Payload: encodeRevoke(&p)})
	if err != nil {
		return Key{}, err
	}
	if res.Replayed {
		return Key{}, fmt.Errorf("%w: key %s is revoked on the system chain (seq %d) but not in the state; run `ledgerctl rebuild-state`",
			chain.ErrCorrupt, r.ID, res.Entry.Seq)
	}
	rec.Key.RevokedUnixNano, rec.Key.RevokedReason = res.Entry.TimeUnixNano, r.Reason
	if err := putRecord(tx, &rec); err != nil {
		return Key{}, err
	}
	return rec.Key, tx.Notify(NotifyChannel)
}

// Get returns a key's record; ErrUnknownKey when no key has the id.
func Get(ctx context.Context, db *chain.DB, id string) (Key, error) {
	if err := ValidateID(id); err != nil {
		return Key{}, err
	}
	var key Key
	err := db.View(ctx, func(tx *chain.Tx) error {
		rec, err := getRecord(tx, id)
		key = rec.Key
		return err
	})
	return key, err
}

// List returns the keys of a tenant ("" for every tenant), valid and
// revoked, ordered by tenant, creation time and id.
func List(ctx context.Context, db *chain.DB, tenant string) ([]Key, error) {
	if tenant != "" {
		if err := ValidateTenant(tenant); err != nil {
			return nil, err
		}
	}
	var keys []Key
	err := db.View(ctx, func(tx *chain.Tx) error {
		keys = nil
		if tenant == "" {
			prefix := recordPrefix()
			for kv, err := range tx.StateScan(prefix, prefixEnd(prefix), false) {
				if err != nil {
					return err
				}
				id := string(kv.Key[len(prefix):])
				r, err := decodeRecord(kv.Value)
				if err != nil || r.Key.ID != id {
					return fmt.Errorf("%w: apikey record of %s: %v", chain.ErrCorrupt, id, err)
				}
				keys = append(keys, r.Key)
			}
			return nil
		}
		prefix := tenantPrefix(tenant)
		var ids []string
		for kv, err := range tx.StateScan(prefix, prefixEnd(prefix), false) {
			if err != nil {
				return err
			}
			ids = append(ids, string(bytes.Clone(kv.Key[len(prefix):])))
		}
		for _, id := range ids {
			r, err := getRecord(tx, id)
			if errors.Is(err, ErrUnknownKey) {
				return fmt.Errorf("%w: apikey tenant index names %s, which has no record", chain.ErrCorrupt, id)
			}
			if err != nil {
				return err
			}
			keys = append(keys, r.Key)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	sortKeys(keys)
	return keys, nil
}

func sortKeys(keys []Key) {
	slices.SortFunc(keys, func(a, b Key) int {
		return cmp.Or(cmp.Compare(a.Tenant, b.Tenant), cmp.Compare(a.CreatedUnixNano, b.CreatedUnixNano), cmp.Compare(a.ID, b.ID))
	})
}

// validateName checks a key name: at most NameLengthMax bytes of UTF-8
// without control or format characters.
func validateName(name string) error {
	return validateText("name", name, NameLengthMax, ErrInvalidName)
}

// validateReason checks a revocation reason as validateName does a name.
func validateReason(reason string) error {
	return validateText("reason", reason, ReasonLengthMax, ErrInvalidReason)
}

func validateText(field, s string, lengthMax int, sentinel error) error {
	if len(s) > lengthMax {
		return invalid(field, sentinel, "%s of %d bytes exceeds %d", field, len(s), lengthMax)
	}
	if !utf8.ValidString(s) {
		return invalid(field, sentinel, "%s is not valid UTF-8", field)
	}
	for i, r := range s {
		if unicode.IsControl(r) || unicode.Is(unicode.Cf, r) {
			return invalid(field, sentinel, "%s has control or format character %U at byte %d", field, r, i)
		}
	}
	return nil
}
