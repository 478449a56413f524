package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/ledgerworks/ledger/audit"
	"github.com/ledgerworks/ledger/checkpoint"
	"github.com/ledgerworks/ledger/merkle"
)

func init() {
	registerDemoStep(14, "proofs: a signed checkpoint of the audit trail", demoCheckpoint)
	registerDemoStep(80, "proofs: an entry proven in the checkpoint, a later checkpoint proven to extend it", demoProofs)
}

// demoProofState is what the proof steps share: the demo's key pair and
// the first checkpoint.
type demoProofState struct {
	signer, verifier string
	first            []byte
	firstCP          checkpoint.Checkpoint
}

// demoCheckpoint signs a checkpoint of the ledger as it is after the raw
// steps, with a key made for the demo.
func demoCheckpoint(ctx context.Context, d *demoEnv) error {
	var err error
	s := &d.proofs
	if s.signer, s.verifier, err = checkpoint.GenerateKey("ledger.example/demo"); err != nil {
		return err
	}
	if s.first, s.firstCP, err = audit.CreateCheckpoint(ctx, d.DB, s.signer); err != nil {
		return err
	}
	d.Printf("checkpoint 1 signed by ledger.example/demo: %s, root %x…\n", plural(int64(s.firstCP.Size), "chain", "chains"), s.firstCP.Root[:6])
	d.Printf("  it commits to each chain's Merkle tree (RFC 9162): its size and root\n")
	return nil
}

// demoProofs checks, as an auditor would, with the verifier key alone: an
// entry proof against the first checkpoint, and a consistency proof from
// it to a second checkpoint after the domain steps; then a tampered proof.
func demoProofs(ctx context.Context, d *demoEnv) error {
	s := &d.proofs
	old, oldCP, signer, verifier := s.first, s.firstCP, s.signer, s.verifier
	name, err := demoAuditChain(d)
	if err != nil {
		return err
	}
	p, err := audit.ProveEntry(ctx, d.DB, old, verifier, name, 2)
	if err != nil {
		return err
	}
	if _, _, err := audit.VerifyEntryProof(p, verifier); err != nil {
		return err
	}
	d.Printf("%s seq 2 is in checkpoint 1: %d + %d hashes (a chain tree of %s, a checkpoint tree of %s), checked with the verifier key alone\n",
		name, len(p.Inclusion), len(p.ChainInclusion), plural(int64(p.ChainSize), "entry", "entries"), plural(int64(oldCP.Size), "chain", "chains"))
	newer, newCP, err := audit.CreateCheckpoint(ctx, d.DB, signer)
	if err != nil {
		return err
	}
	cons, err := audit.ProveConsistency(ctx, d.DB, old, newer, verifier)
	if err != nil {
		return err
	}
	if _, _, err := audit.VerifyConsistencyProof(cons, verifier); err != nil {
		return err
	}
	d.Printf("after the stock, financial and valuation steps, checkpoint 2 (%s): each of checkpoint 1's %s is a prefix of itself in it\n",
		plural(int64(newCP.Size), "chain", "chains"), plural(int64(oldCP.Size), "chain", "chains"))
	p.Inclusion[0][0] ^= 1
	_, _, err = audit.VerifyEntryProof(p, verifier)
	var mismatch *merkle.RootMismatchError
	if !errors.As(err, &mismatch) {
		return fmt.Errorf("a tampered proof was not refused: %v", err)
	}
	d.Printf("the same proof with one hash changed: refused (%v)\n", err)
	d.Printf("  on the command line: ledgerctl keygen, checkpoint --key, prove entry|consistency, verify-proof --key,\n" +
		"  verify --checkpoint (docs/PROOFS.md)\n")
	return nil
}
