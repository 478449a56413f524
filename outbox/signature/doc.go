// Package signature signs and verifies webhook signatures over the raw
// request body: Standard Webhooks (webhook-id, webhook-timestamp,
// webhook-signature; HMAC-SHA256 over id.timestamp.body), Stripe's
// Stripe-Signature (t=…,v1=…; HMAC-SHA256 over t.body) and GitHub's
// X-Hub-Signature-256 (sha256=…; HMAC-SHA256 over the body).
//
// # Basics
//
// The outbox's webhook deliverer signs with SignStandard; the inbox
// verifies with VerifyStandard, VerifyStripe and VerifyGitHub. Every
// verifier takes several secrets, and a header may carry several
// signatures: any signature valid under any secret is accepted, so a
// secret can be rotated without refusing requests signed with the old one.
// Signatures are compared in constant time (hmac.Equal), every secret
// against every signature, so the time taken does not tell which came
// close. Timestamps (Standard Webhooks, Stripe) must lie within a
// tolerance of the verifier's clock, ToleranceDefault (300 s) unless set.
//
// # Caveats
//
// Verify the body exactly as received, before any parsing: a JSON
// re-encoding changes the bytes and fails the check. GitHub's scheme signs
// no timestamp, so a captured request verifies forever: deduplicate on
// X-GitHub-Delivery (the inbox does). Parsers refuse headers longer than
// HeaderLengthMax or with more than SignaturesMax signatures.
package signature
