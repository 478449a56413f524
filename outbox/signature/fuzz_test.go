package signature_test

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ledgerworks/ledger/outbox/signature"
)

// The parsers never panic, and what they accept re-encodes to an
// equivalent header that parses to the same signatures.

func FuzzParseStripeHeader(f *testing.F) {
	f.Add("t=1800000000,v1=" + strings.Repeat("ab", 32))
	f.Add("t=1,v1=" + strings.Repeat("00", 32) + ",v0=zz,v1=" + strings.Repeat("ff", 32))
	f.Add("t=,v1=")
	f.Add(",,=")
	f.Fuzz(func(t *testing.T, header string) {
		h, err := signature.ParseStripeHeader(header)
		if err != nil {
			return
		}
		parts := []string{"t=" + strconv.FormatInt(h.Timestamp, 10)}
		for _, s := range h.V1 {
			parts = append(parts, "v1="+hex.EncodeToString(s))
		}
		again, err := signature.ParseStripeHeader(strings.Join(parts, ","))
		if err != nil || again.Timestamp != h.Timestamp || len(again.V1) != len(h.V1) {
			t.Fatalf("%q parsed to %+v, re-encoded to %+v %v", header, h, again, err)
		}
		for i := range h.V1 {
			if !bytes.Equal(again.V1[i], h.V1[i]) {
				t.Fatalf("signature %d differs", i)
			}
		}
	})
}

func FuzzParseStandardSignatures(f *testing.F) {
	f.Add("v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=")
	f.Add("v1a,xyz v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE= v2,abc")
	f.Add("v1,")
	f.Fuzz(func(t *testing.T, header string) {
		sigs, err := signature.ParseStandardSignatures(header)
		if err != nil {
			return
		}
		var parts []string
		for _, s := range sigs {
			parts = append(parts, "v1,"+base64.StdEncoding.EncodeToString(s))
		}
		again, err := signature.ParseStandardSignatures(strings.Join(parts, " "))
		if err != nil || len(again) != len(sigs) {
			t.Fatalf("%q: re-encoded header fails: %v", header, err)
		}
	})
}

func FuzzVerifyStandard(f *testing.F) {
	key := []byte("fuzz-key")
	now := time.Unix(1_800_000_000, 0)
	f.Add("msg_1", "1800000000", signature.SignStandard(key, "msg_1", now, []byte("{}")), []byte("{}"))
	f.Fuzz(func(t *testing.T, id, ts, sigs string, body []byte) {
		err := signature.VerifyStandard([][]byte{key}, id, ts, sigs, body, now, 0)
		if err == nil && sigs != "" {
			// Accepted: the header holds the right signature.
			want := signature.SignStandard(key, id, time.Unix(mustUnix(t, ts), 0), body)
			if !strings.Contains(" "+sigs+" ", " "+want+" ") && !strings.Contains(sigs, want[3:]) {
				t.Fatalf("accepted %q without %q", sigs, want)
			}
		}
	})
}

func mustUnix(t *testing.T, s string) int64 {
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func FuzzParseGitHubSignature(f *testing.F) {
	f.Add("sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17")
	f.Add("sha256=")
	f.Fuzz(func(t *testing.T, header string) {
		sig, err := signature.ParseGitHubSignature(header)
		if err != nil {
			return
		}
		if again, err := signature.ParseGitHubSignature("sha256=" + hex.EncodeToString(sig)); err != nil || !bytes.Equal(again, sig) {
			t.Fatalf("%q: %v", header, err)
		}
	})
}
