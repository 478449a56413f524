package apikey

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"strings"

	"github.com/zeebo/blake3"
)

// The token format:
//
//	lwk_<id>_<secret>
//
// <id> is the key id, KeyIDLength lowercase hex digits (KeyIDSize random
// bytes); <secret> is SecretSize random bytes in unpadded base64url
// (RFC 4648 §5), SecretTextLength characters. Every part has a fixed
// length, so a token is parsed by position (the secret's alphabet holds
// "_" and "-") and the key id is read without any lookup: the rate
// limiter buckets by it, and a key is found in O(1). The whole token is
// TokenLength characters of the token68 alphabet of RFC 6750, so it goes
// into an Authorization header as it is.
const (
	// TokenPrefix begins every token; scanners that look for leaked
	// secrets can match it.
	TokenPrefix = "lwk_"
	// KeyIDSize is the size of a key id in random bytes (64 bits).
	KeyIDSize = 8
	// KeyIDLength is the length of a key id's text.
	KeyIDLength = 2 * KeyIDSize
	// SecretSize is the size of a token's secret in random bytes
	// (256 bits).
	SecretSize = 32
	// SecretTextLength is the length of the secret's text.
	SecretTextLength = (SecretSize*8 + 5) / 6
	// TokenLength is the length of a whole token.
	TokenLength = len(TokenPrefix) + KeyIDLength + 1 + SecretTextLength
)

// DigestSize is the size of a stored secret digest.
const DigestSize = 32

// Digest is what a key's record holds instead of its secret:
//
//	BLAKE3-256( "ledger/apikey/secret/v1" || 0x00 || lp(id) || lp(secret) )
//
// The secret is 256 random bits, so a fast hash is enough: there is no
// dictionary to search, unlike a password's. The id is hashed with it so a
// digest copied onto another key's record matches no token of that key.
type Digest [DigestSize]byte

// digestDomain separates the digest from every other hash of the ledger.
const digestDomain = "ledger/apikey/secret/v1\x00"

// digestOf computes the digest of a key id's secret, in one call over a
// buffer on the stack for the ids and secrets of the token format.
func digestOf(id string, secret []byte) Digest {
	var stack [len(digestDomain) + 4 + KeyIDLength + 4 + SecretSize]byte
	b := append(stack[:0], digestDomain...)
	b = binary.BigEndian.AppendUint32(b, uint32(len(id)))
	b = append(b, id...)
	b = binary.BigEndian.AppendUint32(b, uint32(len(secret)))
	b = append(b, secret...)
	return Digest(blake3.Sum256(b))
}

// matches compares in constant time.
func (d *Digest) matches(other *Digest) bool { return subtle.ConstantTimeCompare(d[:], other[:]) == 1 }

var secretEncoding = base64.RawURLEncoding.Strict()

// parsedToken is a token split into its parts.
type parsedToken struct {
	id     string
	secret [SecretSize]byte
}

// parseToken splits a token, checking every part's length and alphabet.
// The secret must be the canonical encoding of SecretSize bytes.
func parseToken(token string) (parsedToken, error) {
	var p parsedToken
	id, ok := TokenKeyID(token)
	if !ok {
		return p, ErrMalformedToken
	}
	text := token[len(TokenPrefix)+KeyIDLength+1:]
	n, err := secretEncoding.Decode(p.secret[:], []byte(text))
	if err != nil || n != SecretSize {
		return p, ErrMalformedToken
	}
	p.id = id
	return p, nil
}

// TokenKeyID returns the key id a token names, without checking the
// secret or whether the key exists: the rate limiter buckets by it before
// authentication runs. ok is false for a token not of the format.
func TokenKeyID(token string) (id string, ok bool) {
	if len(token) != TokenLength || !strings.HasPrefix(token, TokenPrefix) {
		return "", false
	}
	id = token[len(TokenPrefix) : len(TokenPrefix)+KeyIDLength]
	if !validID(id) || token[len(TokenPrefix)+KeyIDLength] != '_' {
		return "", false
	}
	return id, true
}

// validID reports whether s is KeyIDLength lowercase hex digits.
func validID(s string) bool {
	if len(s) != KeyIDLength {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

// ValidateID checks a key id's syntax.
func ValidateID(id string) error {
	if !validID(id) {
		return invalid("id", ErrInvalidID, "key id %q: want %d lowercase hex digits", id, KeyIDLength)
	}
	return nil
}

// newSecret draws a key id and a secret from crypto/rand and returns them
// with the token that joins them.
func newSecret() (id string, secret [SecretSize]byte, token string) {
	var idBytes [KeyIDSize]byte
	rand.Read(idBytes[:]) // never fails (crypto/rand)
	rand.Read(secret[:])
	id = hex.EncodeToString(idBytes[:])
	token = TokenPrefix + id + "_" + secretEncoding.EncodeToString(secret[:])
	return id, secret, token
}

// BearerToken returns the token of an Authorization header value of the
// Bearer scheme (RFC 6750 §2.1: the scheme, case-insensitive, one or more
// spaces, a token68). ok is false for any other value, an empty one, or
// one longer than AuthorizationLengthMax.
func BearerToken(header string) (token string, ok bool) {
	const scheme = "bearer"
	if len(header) > AuthorizationLengthMax || len(header) <= len(scheme) ||
		!strings.EqualFold(header[:len(scheme)], scheme) || header[len(scheme)] != ' ' {
		return "", false
	}
	token = strings.TrimLeft(header[len(scheme):], " ")
	if !token68(token) {
		return "", false
	}
	return token, true
}

// token68 reports whether s is RFC 7235's token68:
// 1*( ALPHA / DIGIT / "-" / "." / "_" / "~" / "+" / "/" ) *"=".
func token68(s string) bool {
	body := strings.TrimRight(s, "=")
	if body == "" {
		return false
	}
	for i := 0; i < len(body); i++ {
		c := body[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		case c == '-', c == '.', c == '_', c == '~', c == '+', c == '/':
		default:
			return false
		}
	}
	return true
}
