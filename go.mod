module github.com/ledgerworks/ledger

go 1.26
