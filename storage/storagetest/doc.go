// Package storagetest is the conformance suite that every storage backend
// passes, and the registry of backends that the chain and domain test suites
// run against.
//
// A backend's test calls Run with a function that opens a fresh, empty store.
// A suite above storage loops over Factories so that each of its tests runs
// on every backend without being copied.
package storagetest
