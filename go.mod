module github.com/ledgerworks/ledger

go 1.26

require (
	go.etcd.io/bbolt v1.5.0 // indirect
	golang.org/x/sys v0.45.0 // indirect
	pgregory.net/rapid v1.3.0 // indirect
)
