package server_test

import (
	"os"
	"testing"

	"github.com/ledgerworks/ledger/internal/testbin"
)

func TestMain(m *testing.M) {
	code := m.Run()
	testbin.Remove()
	os.Exit(code)
}
