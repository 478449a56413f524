// Package reliability holds the whole-system tests of the ledger: they try
// hard to break its promises across the engine, the domain packages, the
// bbolt file and the ledgerctl command, and measure how often they fail to.
// It has no code of its own; docs/GUARANTEES.md names the test behind each
// promise.
//
// # Basics
//
//   - crash_test.go, crash_domain_test.go: a child process (this test
//     binary, re-executed) runs multi-chain transactions, stock transfers,
//     valuations, postings and a purchase receipt written by three packages
//     in one transaction, and is killed with SIGKILL at random moments, over
//     many rounds on one file; after each round every acknowledged operation
//     must be whole, no operation half written, every chain must verify and
//     every derived-state check pass.
//   - diskfull_test.go: a ledger on a small tmpfs (root only) is filled until
//     appends fail with a typed storage error; nothing acknowledged is lost,
//     and appends work again once space is freed.
//   - tamper_test.go: random single-byte changes inside stored entries are
//     all reported at their chain and seq; damage to the file's structure
//     makes ledgerctl fail cleanly with exit 5, never panic.
//   - badinput_test.go: a table of refused inputs per public entry point,
//     each leaving every head, entry and state pair unchanged.
//   - contention_test.go: a second process waits for the lock timeout, then
//     gets chain.ErrLocked (ledgerctl: exit 5).
//   - isolation_test.go: two tenants with the same keys and names never see
//     each other's entries or replays.
//   - fuzz_test.go: fuzz targets for public parsers that have none in their
//     own package.
//
// No test skips a known bug: a broken promise fails the suite.
//
// # Caveats
//
// The disk-full test mounts a tmpfs and is skipped unless it runs as root.
// Tests that run ledgerctl build it once per test binary, with the go tool
// found on PATH.
package reliability
