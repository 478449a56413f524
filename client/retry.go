package client

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/ledgerworks/ledger/api"
)

// retryAfterMaxParsed bounds a parsed Retry-After, so a huge value cannot
// overflow a Duration.
const retryAfterMaxParsed = 24 * time.Hour

// parseRetryAfter reads a Retry-After value (RFC 9110 10.2.3): a number of
// seconds or an HTTP date, measured from now. It returns 0 for an absent,
// malformed or past value; the result is at most retryAfterMaxParsed.
func parseRetryAfter(value string, now time.Time) time.Duration {
	v := strings.TrimSpace(value)
	if v == "" {
		return 0
	}
	if v[0] >= '0' && v[0] <= '9' {
		secs, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			if errors.Is(err, strconv.ErrRange) {
				return retryAfterMaxParsed
			}
			return 0
		}
		if secs > uint64(retryAfterMaxParsed/time.Second) {
			return retryAfterMaxParsed
		}
		return time.Duration(secs) * time.Second
	}
	at, err := http.ParseTime(v)
	if err != nil {
		return 0
	}
	d := at.Sub(now)
	if d <= 0 {
		return 0
	}
	return min(d, retryAfterMaxParsed)
}

// retryableStatus reports whether a response is worth the same request
// again: the request is in progress under its key (409 or 425
// REQUEST_IN_PROGRESS), or the server is busy or unreachable behind a proxy
// (429, 502, 503, 504). Every other answer — a key reused with another
// request, an idempotency conflict, a poisoned key, any other 4xx or a 500 —
// is final.
func retryableStatus(status int, code string) bool {
	switch status {
	case http.StatusTooManyRequests, http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		return true
	}
	return code == api.CodeInProgress
}

// retryableTransportError reports whether a failed round trip may succeed
// if sent again: every network failure may, except a certificate the
// client refuses (sending again meets the same certificate).
func retryableTransportError(err error) bool {
	var unknown x509.UnknownAuthorityError
	var hostname x509.HostnameError
	var invalid x509.CertificateInvalidError
	var verify *tls.CertificateVerificationError
	return !errors.As(err, &unknown) && !errors.As(err, &hostname) && !errors.As(err, &invalid) && !errors.As(err, &verify)
}

// backoffCeiling is the ceiling of the wait before retry n (from 1): base
// doubled n-1 times, capped at limit.
func backoffCeiling(n int, base, limit time.Duration) time.Duration {
	c := base
	for i := 1; i < n && c < limit; i++ {
		c *= 2
	}
	return min(c, limit)
}

// jitter draws a wait uniformly from [0, ceiling) (full jitter: concurrent
// clients that failed together spread their retries over the whole window).
func jitter(ceiling time.Duration) time.Duration {
	if ceiling <= 0 {
		return 0
	}
	return time.Duration(rand.Int64N(int64(ceiling)))
}

// sleep waits d or until ctx ends, and returns ctx's error in that case.
func sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}
