package signature

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Errors of verification. A malformed header matches ErrMalformed, a
// signature that matches no secret ErrMismatch, a timestamp outside the
// tolerance ErrStale; each matches ErrInvalid too.
var (
	ErrInvalid   = errors.New("invalid webhook signature")
	ErrMissing   = errors.New("signature header missing")
	ErrMalformed = errors.New("malformed signature header")
	ErrMismatch  = errors.New("signature does not match")
	ErrStale     = errors.New("signature timestamp outside the tolerance")
)

type sigError struct {
	kind   error
	detail string
}

func (e *sigError) Error() string   { return fmt.Sprintf("%v: %s", e.kind, e.detail) }
func (e *sigError) Unwrap() []error { return []error{e.kind, ErrInvalid} }

func fail(kind error, format string, args ...any) error {
	return &sigError{kind: kind, detail: fmt.Sprintf(format, args...)}
}

// Limits on what a parser reads.
const (
	// HeaderLengthMax is the longest signature header parsed.
	HeaderLengthMax = 8 << 10
	// SignaturesMax is the most signatures one header may carry.
	SignaturesMax = 16
	// ToleranceDefault is the accepted distance between a signature's
	// timestamp and the clock when a verifier's Tolerance is zero.
	ToleranceDefault = 300 * time.Second
	// IDLengthMax is the longest message id a Standard Webhooks header
	// may carry.
	IDLengthMax = 256
)

func mac(secret []byte, parts ...[]byte) []byte {
	h := hmac.New(sha256.New, secret)
	for _, p := range parts {
		h.Write(p)
	}
	return h.Sum(nil)
}

// anyMatch reports whether one of the candidate signatures equals the
// HMAC of the signed bytes under one of the secrets; every comparison is
// constant-time.
func anyMatch(secrets [][]byte, candidates [][]byte, signed ...[]byte) bool {
	ok := false
	for _, s := range secrets {
		want := mac(s, signed...)
		for _, c := range candidates {
			if hmac.Equal(want, c) {
				ok = true
			}
		}
	}
	return ok
}

func checkTime(ts int64, now time.Time, tolerance time.Duration) error {
	if tolerance <= 0 {
		tolerance = ToleranceDefault
	}
	d := now.Sub(time.Unix(ts, 0))
	if d > tolerance || d < -tolerance {
		return fail(ErrStale, "timestamp %d is %v from now, tolerance %v", ts, d.Round(time.Second), tolerance)
	}
	return nil
}

func parseUnix(s string) (int64, bool) {
	if s == "" || len(s) > 12 || s[0] == '0' && len(s) > 1 {
		return 0, false
	}
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil || v < 0 {
		return 0, false
	}
	return v, true
}

// ---- Standard Webhooks (standardwebhooks.com) ----

// StandardSecretPrefix starts a Standard Webhooks secret's text.
const StandardSecretPrefix = "whsec_"

// ParseStandardSecret decodes a "whsec_<base64>" secret (the prefix is
// optional) into its key bytes.
func ParseStandardSecret(s string) ([]byte, error) {
	key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(s, StandardSecretPrefix))
	if err != nil || len(key) == 0 {
		return nil, fmt.Errorf("signature: a Standard Webhooks secret is %s followed by base64", StandardSecretPrefix)
	}
	return key, nil
}

// SignStandard returns the webhook-signature value of a message:
// "v1," + base64(HMAC-SHA256(key, id "." timestamp "." body)).
func SignStandard(key []byte, id string, ts time.Time, body []byte) string {
	sum := mac(key, []byte(id), []byte("."), []byte(strconv.FormatInt(ts.Unix(), 10)), []byte("."), body)
	return "v1," + base64.StdEncoding.EncodeToString(sum)
}

// ParseStandardSignatures parses a webhook-signature header: one or more
// space-separated "v1,<base64>" signatures. Signatures of other versions
// are skipped; a header with no v1 signature is malformed.
func ParseStandardSignatures(header string) ([][]byte, error) {
	if len(header) > HeaderLengthMax {
		return nil, fail(ErrMalformed, "webhook-signature of %d bytes", len(header))
	}
	var sigs [][]byte
	for _, part := range strings.Fields(header) {
		version, value, ok := strings.Cut(part, ",")
		if !ok {
			return nil, fail(ErrMalformed, "webhook-signature part %q has no version", part)
		}
		if version != "v1" {
			continue
		}
		sig, err := base64.StdEncoding.DecodeString(value)
		if err != nil || len(sig) != sha256.Size {
			return nil, fail(ErrMalformed, "webhook-signature v1 value is not a base64 SHA-256")
		}
		if len(sigs) == SignaturesMax {
			return nil, fail(ErrMalformed, "more than %d signatures", SignaturesMax)
		}
		sigs = append(sigs, sig)
	}
	if len(sigs) == 0 {
		return nil, fail(ErrMalformed, "webhook-signature holds no v1 signature")
	}
	return sigs, nil
}

// VerifyStandard checks a Standard Webhooks request: the webhook-id,
// webhook-timestamp and webhook-signature header values over the raw body,
// under any of the keys (secret rotation), with the timestamp within
// tolerance of now (ToleranceDefault when zero).
func VerifyStandard(keys [][]byte, id, timestamp, signatures string, body []byte, now time.Time, tolerance time.Duration) error {
	if id == "" || timestamp == "" || signatures == "" {
		return fail(ErrMissing, "webhook-id, webhook-timestamp and webhook-signature are required")
	}
	if len(id) > IDLengthMax || strings.ContainsAny(id, ".") {
		return fail(ErrMalformed, "webhook-id %q", id)
	}
	ts, ok := parseUnix(timestamp)
	if !ok {
		return fail(ErrMalformed, "webhook-timestamp %q is not unix seconds", timestamp)
	}
	sigs, err := ParseStandardSignatures(signatures)
	if err != nil {
		return err
	}
	if err := checkTime(ts, now, tolerance); err != nil {
		return err
	}
	if !anyMatch(keys, sigs, []byte(id), []byte("."), []byte(timestamp), []byte("."), body) {
		return fail(ErrMismatch, "no webhook-signature matches")
	}
	return nil
}

// ---- Stripe ----

// StripeHeader is a parsed Stripe-Signature header.
type StripeHeader struct {
	Timestamp int64
	V1        [][]byte // every v1 signature, any of which may match
}

// ParseStripeHeader parses "t=<unix seconds>,v1=<hex>[,v1=<hex>…]";
// other schemes (v0) are skipped. t once and at least one v1 are required.
func ParseStripeHeader(header string) (StripeHeader, error) {
	var h StripeHeader
	if len(header) > HeaderLengthMax {
		return h, fail(ErrMalformed, "Stripe-Signature of %d bytes", len(header))
	}
	seenT := false
	for _, part := range strings.Split(header, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(part), "=")
		if !ok {
			return h, fail(ErrMalformed, "Stripe-Signature part %q is not key=value", part)
		}
		switch k {
		case "t":
			ts, ok := parseUnix(v)
			if !ok || seenT {
				return h, fail(ErrMalformed, "Stripe-Signature t=%q", v)
			}
			h.Timestamp, seenT = ts, true
		case "v1":
			sig, err := hex.DecodeString(v)
			if err != nil || len(sig) != sha256.Size {
				return h, fail(ErrMalformed, "Stripe-Signature v1 is not a hex SHA-256")
			}
			if len(h.V1) == SignaturesMax {
				return h, fail(ErrMalformed, "more than %d signatures", SignaturesMax)
			}
			h.V1 = append(h.V1, sig)
		}
	}
	if !seenT || len(h.V1) == 0 {
		return h, fail(ErrMalformed, "Stripe-Signature needs t= and a v1=")
	}
	return h, nil
}

// SignStripe returns a Stripe-Signature header for body at ts.
func SignStripe(secret []byte, ts time.Time, body []byte) string {
	t := strconv.FormatInt(ts.Unix(), 10)
	return "t=" + t + ",v1=" + hex.EncodeToString(mac(secret, []byte(t), []byte("."), body))
}

// VerifyStripe checks a Stripe-Signature header over the raw body: any v1
// signature under any secret (Stripe sends one per active secret while a
// secret is rolled), and t within tolerance of now.
func VerifyStripe(secrets [][]byte, header string, body []byte, now time.Time, tolerance time.Duration) error {
	if header == "" {
		return fail(ErrMissing, "no Stripe-Signature header")
	}
	h, err := ParseStripeHeader(header)
	if err != nil {
		return err
	}
	if err := checkTime(h.Timestamp, now, tolerance); err != nil {
		return err
	}
	if !anyMatch(secrets, h.V1, []byte(strconv.FormatInt(h.Timestamp, 10)), []byte("."), body) {
		return fail(ErrMismatch, "no v1 signature matches")
	}
	return nil
}

// ---- GitHub ----

// ParseGitHubSignature parses an X-Hub-Signature-256 header:
// "sha256=<hex>".
func ParseGitHubSignature(header string) ([]byte, error) {
	hexSig, ok := strings.CutPrefix(header, "sha256=")
	if !ok || len(header) > HeaderLengthMax {
		return nil, fail(ErrMalformed, "X-Hub-Signature-256 must be sha256=<hex>")
	}
	sig, err := hex.DecodeString(hexSig)
	if err != nil || len(sig) != sha256.Size {
		return nil, fail(ErrMalformed, "X-Hub-Signature-256 is not a hex SHA-256")
	}
	return sig, nil
}

// SignGitHub returns the X-Hub-Signature-256 value of body.
func SignGitHub(secret, body []byte) string {
	return "sha256=" + hex.EncodeToString(mac(secret, body))
}

// VerifyGitHub checks an X-Hub-Signature-256 header over the raw body
// under any of the secrets. GitHub signs no timestamp: replays are caught
// by deduplication on X-GitHub-Delivery.
func VerifyGitHub(secrets [][]byte, header string, body []byte) error {
	if header == "" {
		return fail(ErrMissing, "no X-Hub-Signature-256 header")
	}
	sig, err := ParseGitHubSignature(header)
	if err != nil {
		return err
	}
	if !anyMatch(secrets, [][]byte{sig}, body) {
		return fail(ErrMismatch, "X-Hub-Signature-256 does not match")
	}
	return nil
}
