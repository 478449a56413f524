package outbox

// WebhookResolving is Webhook whose default dialer resolves names with the
// given resolver, so that a test can make a name resolve to loopback.
var WebhookResolving = webhook
