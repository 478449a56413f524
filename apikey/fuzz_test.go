package apikey

import (
	"bytes"
	"strings"
	"testing"
)

// exampleToken is a well-formed token (its secret is 32 bytes of 0xfb...).
const exampleToken = "lwk_0123456789abcdef_-_v7-_v7-_v7-_v7-_v7-_v7-_v7-_v7-_v7-_v7-_s"

// FuzzParseToken: a token parses exactly when it is TokenLength characters
// of the format, its id is what TokenKeyID reads, and printing the parts
// again gives the token back (one spelling per token).
func FuzzParseToken(f *testing.F) {
	_, _, fresh := newSecret()
	for _, seed := range []string{exampleToken, fresh, "", "lwk_", "lwk_0123456789ABCDEF_" + strings.Repeat("A", SecretTextLength),
		"lwk_0123456789abcdef_" + strings.Repeat("A", SecretTextLength-1) + "B", exampleToken[:TokenLength-1] + "=",
		"xyz_0123456789abcdef_" + exampleToken[21:], strings.Replace(exampleToken, "_-", "--", 1)} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, token string) {
		p, err := parseToken(token)
		id, idOK := TokenKeyID(token)
		if err != nil {
			if idOK && len(token) != TokenLength {
				t.Fatalf("TokenKeyID accepts %q of %d bytes", token, len(token))
			}
			return
		}
		if !idOK || id != p.id || !validID(p.id) {
			t.Fatalf("parsed %q, TokenKeyID says %q %v", token, id, idOK)
		}
		if again := TokenPrefix + p.id + "_" + secretEncoding.EncodeToString(p.secret[:]); again != token {
			t.Fatalf("%q parses as %q", token, again)
		}
		if _, ok := BearerToken("Bearer " + token); !ok {
			t.Fatalf("a token %q is not a bearer token68", token)
		}
	})
}

// FuzzBearerToken: what BearerToken returns is the header's token68 after
// the scheme, and a header it accepts is at most AuthorizationLengthMax.
func FuzzBearerToken(f *testing.F) {
	for _, seed := range []string{"Bearer " + exampleToken, "bearer   abc==", "BEARER x", "Bearer", "Bearer ", "Basic dXNlcjpwYXNz",
		"Bearer a b", "Bearer =", "Bearer abc=def", "Bearer\tabc", " Bearer abc", "Bearer " + strings.Repeat("a", AuthorizationLengthMax)} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, header string) {
		token, ok := BearerToken(header)
		if !ok {
			return
		}
		if len(header) > AuthorizationLengthMax || !strings.EqualFold(header[:7], "bearer ") || !strings.HasSuffix(header, token) {
			t.Fatalf("BearerToken(%q) = %q", header, token)
		}
		if strings.TrimLeft(header[7:], " ") != token || token == "" || strings.ContainsAny(token, " \t\r\n,\"") {
			t.Fatalf("BearerToken(%q) = %q", header, token)
		}
		if i := strings.IndexByte(token, '='); i >= 0 && strings.Trim(token[i:], "=") != "" {
			t.Fatalf("BearerToken(%q) = %q: padding inside", header, token)
		}
	})
}

// FuzzDecodeRecords: every payload and state record that decodes obeys
// the rules of a new key (decode checks them) and encodes to the same bytes.
func FuzzDecodeRecords(f *testing.F) {
	digest := digestOf("0123456789abcdef", []byte("secret"))
	create := createPayload{ID: "0123456789abcdef", Tenant: "acme", Name: "erp", Scopes: []Scope{ScopeRead, ScopeAdmin}, Digest: digest}
	rec := record{Key: Key{ID: create.ID, Tenant: "acme", Name: "erp", Scopes: create.Scopes, CreatedUnixNano: 1, RevokedUnixNano: 2, RevokedReason: "leaked"}, Digest: digest}
	for _, seed := range [][]byte{encodeCreate(&create), encodeRevoke(&revokePayload{ID: create.ID, Reason: "rotated"}), encodeRecord(&rec), {}, {1}, {2, 0}} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if p, err := decodeCreate(b); err == nil {
			if !bytes.Equal(encodeCreate(&p), b) {
				t.Fatalf("create %x re-encodes differently", b)
			}
			if checkCreate(p.ID, p.Tenant, p.Name, p.Scopes) != nil {
				t.Fatalf("create %+v breaks a rule", p)
			}
		}
		if p, err := decodeRevoke(b); err == nil {
			if !bytes.Equal(encodeRevoke(&p), b) || ValidateID(p.ID) != nil {
				t.Fatalf("revoke %x: %+v", b, p)
			}
		}
		if r, err := decodeRecord(b); err == nil {
			if !bytes.Equal(encodeRecord(&r), b) {
				t.Fatalf("record %x re-encodes differently", b)
			}
		}
	})
}
