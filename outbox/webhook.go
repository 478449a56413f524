package outbox

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/ledgerworks/ledger/outbox/signature"
)

// WebhookTimeoutDefault bounds one webhook request when
// WebhookOptions.Timeout is zero.
const WebhookTimeoutDefault = 10 * time.Second

// webhookAnswerMax bounds the part of a response body recorded as the
// outcome's detail.
const webhookAnswerMax = 256

// webhookLocationMax bounds the part of a redirect's Location recorded as
// the outcome's detail.
const webhookLocationMax = 512

// WebhookOptions configure the built-in webhook deliverer. URL and Secret
// are required.
type WebhookOptions struct {
	// URL receives every message of the topic as a POST.
	URL string
	// Secret is the Standard Webhooks signing key, "whsec_<base64>".
	Secret string
	// Timeout bounds one request; WebhookTimeoutDefault when zero.
	Timeout time.Duration
	// AllowPrivateAddresses lets the deliverer connect to the addresses
	// CheckAddress refuses (loopback, private, link-local, …). Off by
	// default: a URL naming such an address is refused here, and a host
	// that resolves to one is refused when the deliverer connects.
	AllowPrivateAddresses bool
	// Client sends the requests when set, through its own transport (the
	// address checks above are the default transport's); redirects are
	// never followed, whatever its CheckRedirect. When nil, a client with
	// Timeout, no proxy (HTTP_PROXY and its kin are ignored: a proxy
	// would connect to addresses the deliverer never sees) and a dialer
	// that checks every address it connects to.
	Client *http.Client
	// Clock stamps webhook-timestamp; time.Now when nil.
	Clock func() time.Time
}

// reservedHeaders are set by the deliverer; a message header of the same
// name is not sent.
var reservedHeaders = map[string]bool{"Idempotency-Key": true, "Webhook-Id": true, "Webhook-Timestamp": true,
	"Webhook-Signature": true, "Content-Length": true, "Host": true}

// Webhook returns a Handler that POSTs each message's payload to o.URL with
// its headers, Idempotency-Key: outbox:<id> and the Standard Webhooks
// headers (webhook-id: outbox:<id>, the same on every attempt;
// webhook-timestamp; webhook-signature: v1, HMAC-SHA256 over
// id.timestamp.body). A 2xx answer delivers the message; a 3xx is never
// followed and is permanent, its Location recorded (a moved endpoint
// stays moved: an operator fixes the URL and requeues the dead letter);
// 4xx other than 408 and 429 is permanent (dead letter); a refused
// address (ErrAddressRefused) is permanent; anything else, a timeout or a
// network error is transient (retry). The status and the start of the
// answer are recorded with the outcome. When the attempt is a span (the
// worker's TracerProvider), the request carries its traceparent, in place
// of a message header of that name, and the span the answer's status.
func Webhook(o WebhookOptions) (Handler, error) {
	return webhook(o, nil)
}

// webhook is Webhook whose default dialer resolves names with resolver
// (the system's when nil).
func webhook(o WebhookOptions, resolver *net.Resolver) (Handler, error) {
	u, err := url.Parse(o.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, invalid("url", ErrInvalidOptions, "webhook URL %q: want http(s)://host/…", o.URL)
	}
	if !o.AllowPrivateAddresses {
		if err := checkHost(u.Hostname()); err != nil {
			return nil, invalid("url", ErrAddressRefused, "webhook URL %q: %v", o.URL, err)
		}
	}
	key, err := signature.ParseStandardSecret(o.Secret)
	if err != nil {
		return nil, invalid("secret", ErrInvalidOptions, "%v", err)
	}
	if o.Timeout <= 0 {
		o.Timeout = WebhookTimeoutDefault
	}
	client := webhookClient(o, resolver)
	clock := o.Clock
	if clock == nil {
		clock = time.Now
	}
	return func(ctx context.Context, d *Delivery) error {
		ctx, cancel := context.WithTimeout(ctx, o.Timeout)
		defer cancel()
		m := &d.Message
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, o.URL, bytes.NewReader(m.Payload))
		if err != nil {
			return Permanent(err)
		}
		for _, h := range m.Headers {
			if name := http.CanonicalHeaderKey(h.Name); !reservedHeaders[name] {
				req.Header.Set(name, h.Value)
			}
		}
		if req.Header.Get("Content-Type") == "" {
			req.Header.Set("Content-Type", "application/json")
		}
		now := clock()
		req.Header.Set("Idempotency-Key", m.Key)
		req.Header.Set("Webhook-Id", m.Key)
		req.Header.Set("Webhook-Timestamp", fmt.Sprint(now.Unix()))
		req.Header.Set("Webhook-Signature", signature.SignStandard(key, m.Key, now, m.Payload))
		injectTraceParent(ctx, req.Header)
		resp, err := client.Do(req)
		if err != nil {
			if errors.Is(err, ErrAddressRefused) {
				return Permanent(fmt.Errorf("webhook %s: %w", u.Host, err))
			}
			return fmt.Errorf("webhook %s: %w", u.Host, err)
		}
		defer resp.Body.Close()
		traceWebhook(ctx, resp.StatusCode)
		if resp.StatusCode >= 300 && resp.StatusCode < 400 {
			// Not followed: the Location could name any host, internal
			// ones included, and a 307 would carry the signed body there.
			loc := resp.Header.Get("Location")
			d.Detail = fmt.Sprintf("HTTP %d redirect not followed, Location %q", resp.StatusCode, loc[:min(len(loc), webhookLocationMax)])
			return Permanent(errors.New(d.Detail))
		}
		answer, _ := io.ReadAll(io.LimitReader(resp.Body, webhookAnswerMax))
		io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10)) // let the connection be reused
		d.Detail = strings.TrimSpace(fmt.Sprintf("HTTP %d %s", resp.StatusCode, answer))
		return webhookOutcome(resp.StatusCode, d.Detail)
	}, nil
}

// webhookClient is o.Client made never to follow a redirect, or the
// default client: no proxy, and a dialer that checks every address it
// connects to unless o.AllowPrivateAddresses.
func webhookClient(o WebhookOptions, resolver *net.Resolver) *http.Client {
	var client http.Client
	if o.Client != nil {
		client = *o.Client
	} else {
		dialer := &net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second, Resolver: resolver}
		if !o.AllowPrivateAddresses {
			dialer.Control = controlDial
		}
		// Proxy nil: no proxy, whatever the environment says.
		t := &http.Transport{Proxy: nil, DialContext: dialer.DialContext, ForceAttemptHTTP2: true, MaxIdleConns: 100,
			IdleConnTimeout: 90 * time.Second, TLSHandshakeTimeout: 10 * time.Second, ExpectContinueTimeout: time.Second}
		client = http.Client{Transport: t, Timeout: o.Timeout}
	}
	client.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	return &client
}

// webhookOutcome classifies an HTTP status.
func webhookOutcome(code int, detail string) error {
	switch {
	case code >= 200 && code < 300:
		return nil
	case code >= 400 && code < 500 && code != http.StatusRequestTimeout && code != http.StatusTooManyRequests:
		return Permanent(errors.New(detail))
	}
	return errors.New(detail)
}
