package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/ledgerworks/ledger/api"
	"github.com/ledgerworks/ledger/internal/buildinfo"
)

func init() { registerCommand(newVersionCommand) }

func newVersionCommand(a *app) *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print this build's version, its commit, its Go version and the formats it reads and writes",
		Long: "version prints the module version, the VCS revision and time when the build recorded them, the Go\n" +
			"version, the entry format (docs/FORMAT.md), the bolt file layout and the PostgreSQL schema version\n" +
			"this build reads and writes (docs/UPGRADING.md). `ledgerctl --version` prints the same.",
		Args: noArgs,
		RunE: func(cmd *cobra.Command, args []string) error { return a.printVersion(cmd) },
	}
}

// printVersion prints the running build's version (version, --version).
func (a *app) printVersion(cmd *cobra.Command) error {
	v := buildinfo.Get()
	return a.print(cmd, v, func(w io.Writer) error {
		_, err := io.WriteString(w, versionText(v))
		return err
	})
}

// versionText is the text form of a version: the first line names the
// build, the others one fact each.
func versionText(v api.Version) string {
	var b strings.Builder
	fmt.Fprintf(&b, "ledgerctl %s\n", v.Version)
	fmt.Fprintf(&b, "module:          %s\n", v.Module)
	if v.VCSRevision != "" {
		modified := ""
		if v.VCSModified {
			modified = " (modified)"
		}
		fmt.Fprintf(&b, "revision:        %s%s\n", v.VCSRevision, modified)
	}
	if v.VCSTime != "" {
		fmt.Fprintf(&b, "revision time:   %s\n", v.VCSTime)
	}
	fmt.Fprintf(&b, "go:              %s\n", v.GoVersion)
	fmt.Fprintf(&b, "entry format:    %s\n", v.Format)
	fmt.Fprintf(&b, "file format:     %s (reads %s)\n", v.FileFormat, strings.Join(v.FileFormatsRead, ", "))
	fmt.Fprintf(&b, "postgres schema: %d\n", v.PostgresSchema)
	return b.String()
}
