package outbox_test

import (
	"flag"
	"os"
	"testing"
)

// stateMachineChecksDefault is how many rapid checks a plain `go test`
// runs: every step is a committed transaction. Pass -rapid.checks=N (or
// RAPID_CHECKS) for a longer run.
const stateMachineChecksDefault = "40"

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) != "" {
		os.Exit(childMain())
	}
	flag.Parse()
	explicit := false
	flag.Visit(func(f *flag.Flag) { explicit = explicit || f.Name == "rapid.checks" })
	if _, set := os.LookupEnv("RAPID_CHECKS"); !explicit && !set {
		if err := flag.Set("rapid.checks", stateMachineChecksDefault); err != nil {
			panic(err)
		}
	}
	os.Exit(m.Run())
}
