package signature_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/ledgerworks/ledger/outbox/signature"
)

// The example of the Standard Webhooks specification.
func TestStandardSpecExample(t *testing.T) {
	key, err := signature.ParseStandardSecret("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")
	if err != nil {
		t.Fatal(err)
	}
	ts := time.Unix(1614265330, 0)
	body := []byte(`{"test": 2432232314}`)
	const want = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="
	if got := signature.SignStandard(key, "msg_p5jXN8AQM9LWM0D4loKWxJek", ts, body); got != want {
		t.Fatalf("signature %s, want %s", got, want)
	}
	if err := signature.VerifyStandard([][]byte{key}, "msg_p5jXN8AQM9LWM0D4loKWxJek", "1614265330", "v0,bogus "+want, body, ts.Add(time.Minute), 0); err != nil {
		t.Fatal(err)
	}
}

func TestStandardRefusals(t *testing.T) {
	old, _ := signature.ParseStandardSecret("whsec_b2xkLXNlY3JldC1rZXk=")
	current, _ := signature.ParseStandardSecret("whsec_Y3VycmVudC1zZWNyZXQ=")
	now := time.Unix(1_800_000_000, 0)
	body := []byte(`{"id":"evt_1"}`)
	sig := signature.SignStandard(old, "msg_1", now, body)
	ts := "1800000000"
	cases := []struct {
		name         string
		keys         [][]byte
		id, ts, sigs string
		body         []byte
		now          time.Time
		want         error
	}{
		{"rotated: the old secret still listed", [][]byte{current, old}, "msg_1", ts, sig, body, now, nil},
		{"wrong secret", [][]byte{current}, "msg_1", ts, sig, body, now, signature.ErrMismatch},
		{"body changed", [][]byte{old}, "msg_1", ts, sig, []byte(`{"id":"evt_2"}`), now, signature.ErrMismatch},
		{"id changed", [][]byte{old}, "msg_2", ts, sig, body, now, signature.ErrMismatch},
		{"stale", [][]byte{old}, "msg_1", ts, sig, body, now.Add(301 * time.Second), signature.ErrStale},
		{"future", [][]byte{old}, "msg_1", ts, sig, body, now.Add(-301 * time.Second), signature.ErrStale},
		{"no signature", [][]byte{old}, "msg_1", ts, "", body, now, signature.ErrMissing},
		{"not base64", [][]byte{old}, "msg_1", ts, "v1,***", body, now, signature.ErrMalformed},
		{"timestamp not a number", [][]byte{old}, "msg_1", "12a", sig, body, now, signature.ErrMalformed},
		{"only other versions", [][]byte{old}, "msg_1", ts, "v2,abc", body, now, signature.ErrMalformed},
	}
	for _, c := range cases {
		err := signature.VerifyStandard(c.keys, c.id, c.ts, c.sigs, c.body, c.now, 0)
		if c.want == nil && err != nil || c.want != nil && (!errors.Is(err, c.want) || !errors.Is(err, signature.ErrInvalid)) {
			t.Errorf("%s: %v, want %v", c.name, err, c.want)
		}
	}
}

func TestStripe(t *testing.T) {
	old, current := []byte("whsec_old"), []byte("whsec_new")
	now := time.Unix(1_800_000_000, 0)
	body := []byte(`{"id":"evt_1","type":"payment_intent.succeeded"}`)
	oldHeader := signature.SignStripe(old, now, body)
	newHeader := signature.SignStripe(current, now, body)
	// While a secret is rolled Stripe sends a v1 for each: either matches.
	both := newHeader + ",v1=" + strings.SplitN(oldHeader, "v1=", 2)[1] + ",v0=6ffbb59b2300aae63f272406069a9788598b792a944a07aba816edb039989a39"
	for _, secrets := range [][][]byte{{old}, {current}, {current, old}} {
		if err := signature.VerifyStripe(secrets, both, body, now.Add(299*time.Second), 0); err != nil {
			t.Errorf("secrets %q: %v", secrets, err)
		}
	}
	cases := []struct {
		name   string
		header string
		body   []byte
		now    time.Time
		tol    time.Duration
		want   error
	}{
		{"stale", oldHeader, body, now.Add(301 * time.Second), 0, signature.ErrStale},
		{"inside a longer tolerance", oldHeader, body, now.Add(301 * time.Second), time.Hour, nil},
		{"body changed", oldHeader, []byte(`{}`), now, 0, signature.ErrMismatch},
		{"timestamp changed", strings.Replace(oldHeader, "t=1800000000", "t=1800000001", 1), body, now, 0, signature.ErrMismatch},
		{"no v1", "t=1800000000,v0=abcd", body, now, 0, signature.ErrMalformed},
		{"no t", "v1=" + strings.Repeat("ab", 32), body, now, 0, signature.ErrMalformed},
		{"t twice", "t=1,t=2,v1=" + strings.Repeat("ab", 32), body, now, 0, signature.ErrMalformed},
		{"missing", "", body, now, 0, signature.ErrMissing},
	}
	for _, c := range cases {
		err := signature.VerifyStripe([][]byte{old}, c.header, c.body, c.now, c.tol)
		if c.want == nil && err != nil || c.want != nil && !errors.Is(err, c.want) {
			t.Errorf("%s: %v, want %v", c.name, err, c.want)
		}
	}
}

func TestGitHub(t *testing.T) {
	secret := []byte("It's a Secret to Everybody")
	body := []byte("Hello, World!")
	// The example of GitHub's documentation on validating deliveries.
	const want = "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17"
	if got := signature.SignGitHub(secret, body); got != want {
		t.Fatalf("signature %s, want %s", got, want)
	}
	if err := signature.VerifyGitHub([][]byte{[]byte("other"), secret}, want, body); err != nil {
		t.Fatal(err)
	}
	for header, kind := range map[string]error{
		"":                                  signature.ErrMissing,
		"sha1=abc":                          signature.ErrMalformed,
		"sha256=zz":                         signature.ErrMalformed,
		"sha256=" + strings.Repeat("0", 64): signature.ErrMismatch,
	} {
		if err := signature.VerifyGitHub([][]byte{secret}, header, body); !errors.Is(err, kind) {
			t.Errorf("%q: %v, want %v", header, err, kind)
		}
	}
}
