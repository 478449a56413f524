package postgres_test

import (
	"testing"

	"github.com/ledgerworks/ledger/storage/storagetest"
)

func TestConformance(t *testing.T) {
	storagetest.Run(t, storagetest.OpenPostgres)
}

func TestConformanceKeyBatches(t *testing.T) {
	storagetest.RunKeyBatches(t, storagetest.OpenPostgres)
}
