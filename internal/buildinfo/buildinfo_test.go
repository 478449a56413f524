package buildinfo

import (
	"runtime"
	"runtime/debug"
	"slices"
	"testing"

	"github.com/ledgerworks/ledger/storage/bolt"
	"github.com/ledgerworks/ledger/storage/postgres"
)

func TestFromBuildInfoReadsVersionAndVCS(t *testing.T) {
	info := &debug.BuildInfo{GoVersion: "go1.99.1", Main: debug.Module{Path: Module, Version: "v0.1.0"},
		Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "abc123"}, {Key: "vcs.time", Value: "2026-12-01T10:00:00Z"},
			{Key: "vcs.modified", Value: "true"}, {Key: "GOOS", Value: "linux"}}}
	v := fromBuildInfo(info, true)
	if v.Version != "v0.1.0" || v.VCSRevision != "abc123" || v.VCSTime != "2026-12-01T10:00:00Z" || !v.VCSModified || v.GoVersion != "go1.99.1" {
		t.Fatalf("version %+v", v)
	}
	if v.Format != Format || v.FileFormat != bolt.Format || v.PostgresSchema != postgres.SchemaVersion() || v.PostgresSchema < 1 {
		t.Fatalf("formats %+v", v)
	}
	if !slices.Contains(v.FileFormatsRead, bolt.Format) || !slices.Contains(v.FileFormatsRead, bolt.FormatV1) {
		t.Fatalf("file formats read %v", v.FileFormatsRead)
	}
}

func TestFromBuildInfoWithoutInformation(t *testing.T) {
	v := fromBuildInfo(nil, false)
	if v.Version != develVersion || v.VCSRevision != "" || v.GoVersion != runtime.Version() || v.Module != Module {
		t.Fatalf("version %+v", v)
	}
}

func TestFromBuildInfoOfAnImporter(t *testing.T) {
	info := &debug.BuildInfo{Main: debug.Module{Path: "example.com/erp", Version: "v3.0.0"},
		Deps: []*debug.Module{{Path: "example.com/other", Version: "v1.0.0"}, {Path: Module, Version: "v0.2.0"}}}
	if v := fromBuildInfo(info, true); v.Version != "v0.2.0" {
		t.Fatalf("version %q, want the ledger dependency's v0.2.0", v.Version)
	}
}
