package stockmovement_test

import (
	"flag"
	"os"
	"testing"
)

// stateMachineChecksDefault is how many rapid checks a plain `go test` runs.
// Every step of the state machine is a committed (fsynced) transaction, so
// rapid's default of 100 checks would dominate the suite; pass
// -rapid.checks=N (or RAPID_CHECKS) for a longer run.
const stateMachineChecksDefault = "30"

func TestMain(m *testing.M) {
	flag.Parse()
	explicit := false
	flag.Visit(func(f *flag.Flag) { explicit = explicit || f.Name == "rapid.checks" })
	if _, set := os.LookupEnv("RAPID_CHECKS"); !explicit && !set {
		if err := flag.Set("rapid.checks", stateMachineChecksDefault); err != nil {
			panic(err)
		}
	}
	code := m.Run()
	closeBenchLedgers()
	os.Exit(code)
}
