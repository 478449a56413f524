package server_test

import (
	"net/http"
	"testing"

	"github.com/ledgerworks/ledger/api"
	"github.com/ledgerworks/ledger/server"
	"github.com/ledgerworks/ledger/storage/bolt"
	"github.com/ledgerworks/ledger/storage/postgres"
)

// GET /healthz reports the build's version and the formats it reads and
// writes, without an API key.
func TestHealthReportsVersion(t *testing.T) {
	ts := startServer(t, openBolt(t), server.Options{})
	var h api.Health
	ts.do(http.MethodGet, "/healthz", "", "", nil).decode(t, http.StatusOK, &h)
	if h.Status != "ok" || h.Version == nil {
		t.Fatalf("health %+v", h)
	}
	v := *h.Version
	if v.Module != "github.com/ledgerworks/ledger" || v.Version == "" || v.GoVersion == "" || v.Format != "v1" ||
		v.FileFormat != bolt.Format || v.PostgresSchema != postgres.SchemaVersion() {
		t.Fatalf("version %+v", v)
	}
	// /readyz answers readiness only.
	var ready api.Health
	ts.do(http.MethodGet, "/readyz", "", "", nil).decode(t, http.StatusOK, &ready)
	if ready.Version != nil {
		t.Fatalf("readyz %+v", ready)
	}
}
