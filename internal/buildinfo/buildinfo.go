// Package buildinfo says which build of the ledger is running and which
// formats it reads and writes: `ledgerctl version`, serve's first log line
// and GET /healthz report it.
package buildinfo

import (
	"runtime"
	"runtime/debug"

	"github.com/ledgerworks/ledger/api"
	"github.com/ledgerworks/ledger/storage/bolt"
	"github.com/ledgerworks/ledger/storage/postgres"
)

// Module is the module path of the ledger.
const Module = "github.com/ledgerworks/ledger"

// Format is the version of the entry hashing and export format that every
// build writes (docs/FORMAT.md).
const Format = "v1"

// develVersion is the module version of a build from a checkout.
const develVersion = "(devel)"

// Get returns the running build's version. The module version and the VCS
// fields come from the build information the Go toolchain embeds: `go
// install module@version` records the version, a build inside a git
// checkout the revision and its time.
func Get() api.Version {
	info, ok := debug.ReadBuildInfo()
	return fromBuildInfo(info, ok)
}

// fromBuildInfo builds the version from the embedded build information
// (ok false when the binary has none).
func fromBuildInfo(info *debug.BuildInfo, ok bool) api.Version {
	v := api.Version{
		Module:          Module,
		Version:         develVersion,
		GoVersion:       runtime.Version(),
		Format:          Format,
		FileFormat:      bolt.Format,
		FileFormatsRead: []string{bolt.FormatV1, bolt.FormatV2, bolt.Format},
		PostgresSchema:  postgres.SchemaVersion(),
	}
	if !ok || info == nil {
		return v
	}
	if info.GoVersion != "" {
		v.GoVersion = info.GoVersion
	}
	if info.Main.Path == Module && info.Main.Version != "" {
		v.Version = info.Main.Version
	} else {
		// A test binary or a program that imports the ledger: the ledger's
		// version is its dependency's.
		for _, dep := range info.Deps {
			if dep.Path == Module {
				v.Version = dep.Version
			}
		}
	}
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			v.VCSRevision = s.Value
		case "vcs.time":
			v.VCSTime = s.Value
		case "vcs.modified":
			v.VCSModified = s.Value == "true"
		}
	}
	return v
}
