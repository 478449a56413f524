// Command ledgerctl is the operator's and auditor's command line for a
// hash-chained ledger: it appends, reads, verifies, exports and imports
// entries. docs/CLI.md documents every command, flag, output and exit code.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := execute(ctx, newApp(), os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
