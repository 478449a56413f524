//go:build race

package chain_test

// raceEnabled is true when the tests run under the race detector, which
// makes memory-bound steps several times slower.
const raceEnabled = true
