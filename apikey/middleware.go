package apikey

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/ledgerworks/ledger/internal/problem"
)

// Realm is the realm of the WWW-Authenticate challenge.
const Realm = "ledger"

// Problem codes of the middleware's refusals.
const (
	CodeUnauthenticated  = "UNAUTHENTICATED"
	CodeStoreUnavailable = "STORE_UNAVAILABLE"
)

// storeRetryAfter is the Retry-After of a refusal because the keys could
// not be read.
const storeRetryAfter = time.Second

type contextKey struct{}

// NewContext returns a copy of ctx that carries the key.
func NewContext(ctx context.Context, k Key) context.Context {
	return context.WithValue(ctx, contextKey{}, k)
}

// FromContext returns the key Middleware put in the request's context.
func FromContext(ctx context.Context) (Key, bool) {
	k, ok := ctx.Value(contextKey{}).(Key)
	return k, ok
}

// Middleware authenticates every request by its "Authorization: Bearer
// <token>" header and puts the key in the request's context (FromContext).
// A request without the header, with two, or with a token that does not
// authenticate is refused with 401 UNAUTHENTICATED and a WWW-Authenticate
// challenge (RFC 6750 §3; error="invalid_token" unless the header was
// missing);
// when the keys cannot be read, 503 STORE_UNAVAILABLE with Retry-After.
// Scopes are the handlers' to check.
func Middleware(a *Authenticator) func(http.Handler) http.Handler {
	return MiddlewareFunc(a.Authenticate)
}

// MiddlewareFunc is Middleware with authenticate in place of
// Authenticator.Authenticate: it must answer as Authenticate does (a
// server that has authenticated the request's token already, for its rate
// limiter, hands that answer on instead of computing the digest again).
func MiddlewareFunc(authenticate func(ctx context.Context, token string) (Key, error)) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			values := r.Header.Values("Authorization")
			if len(values) == 0 {
				refuse(w, `Bearer realm="`+Realm+`"`, "an Authorization: Bearer header is required")
				return
			}
			token, ok := BearerToken(values[0])
			if len(values) > 1 || !ok {
				refuse(w, `Bearer realm="`+Realm+`", error="invalid_token"`, "the Authorization header is not one Bearer token")
				return
			}
			key, err := authenticate(r.Context(), token)
			switch {
			case errors.Is(err, ErrUnauthenticated):
				refuse(w, `Bearer realm="`+Realm+`", error="invalid_token"`, "the API key is not valid")
				return
			case err != nil:
				problem.Write(w, problem.Problem{Status: http.StatusServiceUnavailable, Code: CodeStoreUnavailable,
					Detail: "the API keys cannot be read", RetryAfter: storeRetryAfter})
				return
			}
			next.ServeHTTP(w, r.WithContext(NewContext(r.Context(), key)))
		})
	}
}

func refuse(w http.ResponseWriter, challenge, detail string) {
	w.Header().Set("WWW-Authenticate", challenge)
	problem.Write(w, problem.Problem{Status: http.StatusUnauthorized, Code: CodeUnauthenticated, Detail: detail})
}
