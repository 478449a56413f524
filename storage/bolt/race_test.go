//go:build race

package bolt_test

// raceEnabled is true when the tests run under the race detector, whose
// shadow memory is several times the program's own.
const raceEnabled = true
