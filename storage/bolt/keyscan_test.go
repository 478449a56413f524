package bolt_test

import (
	"testing"

	"github.com/ledgerworks/ledger/storage/storagetest"
)

func TestScanKeysConformance(t *testing.T) {
	storagetest.RunKeyScan(t, storagetest.OpenBolt)
}
