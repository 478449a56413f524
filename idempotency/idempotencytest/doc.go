// Package idempotencytest is the conformance suite every idempotency.Store
// passes: the store rules (Run) and the guard's contract over HTTP on
// 127.0.0.1 (the production checklist, one named test each). A store's
// test calls Run with a Harness that opens a fresh, empty store.
package idempotencytest
