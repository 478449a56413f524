package main

import (
	"github.com/spf13/cobra"

	"github.com/ledgerworks/ledger/audit"
	"github.com/ledgerworks/ledger/chain"
)

// checkpointTrees returns the tree heads of verify --checkpoint: the ones
// the ledger recorded for the signed checkpoint, checked against its
// signature and root (nil without --checkpoint).
func checkpointTrees(cmd *cobra.Command, db *chain.DB, opts verifyOptions) ([]chain.TreeHead, error) {
	if opts.checkpoint == "" {
		if opts.key != "" {
			return nil, usageErrorf("--key goes with --checkpoint")
		}
		return nil, nil
	}
	key, err := readKeyFile(opts.key, "--key", verifierKey)
	if err != nil {
		return nil, err
	}
	signed, err := readProofFile(opts.checkpoint)
	if err != nil {
		return nil, err
	}
	trees, _, err := audit.CheckpointTrees(cmd.Context(), db, signed, key)
	return trees, err
}
