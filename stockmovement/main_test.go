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

// stateMachineChecksShared is the default on a shared database backend,
// where every step is a network round trip per statement.
const stateMachineChecksShared = "10"

// checksExplicit is set when the command line or environment chose the
// number of rapid checks; the defaults above then do not apply.
var checksExplicit bool

func TestMain(m *testing.M) {
	flag.Parse()
	explicit := false
	flag.Visit(func(f *flag.Flag) { explicit = explicit || f.Name == "rapid.checks" })
	_, set := os.LookupEnv("RAPID_CHECKS")
	checksExplicit = explicit || set
	if !checksExplicit {
		if err := flag.Set("rapid.checks", stateMachineChecksDefault); err != nil {
			panic(err)
		}
	}
	code := m.Run()
	closeBenchLedgers()
	os.Exit(code)
}
