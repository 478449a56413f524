package main

import (
	"encoding/json"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/ledgerworks/ledger/audit"
)

func init() { registerCommand(newVerifyProofCommand) }

// verifyProofJSON is what verify-proof -o json prints for a proof that
// holds.
type verifyProofJSON struct {
	OK     bool            `json:"ok"`
	Format string          `json:"format"`
	Old    *checkpointJSON `json:"old,omitempty"`
	// Checkpoint is the entry proof's, or a consistency proof's new one.
	Checkpoint checkpointJSON `json:"checkpoint"`
	Chain      string         `json:"chain,omitempty"`
	Seq        uint64         `json:"seq,omitempty"`
	Chains     int            `json:"chains,omitempty"`
}

func newVerifyProofCommand(a *app) *cobra.Command {
	var pub string
	cmd := &cobra.Command{
		Use:   "verify-proof --key PUB PROOF.json",
		Short: "Check an entry or consistency proof offline, without the ledger; exit 1 when refused",
		Long: "verify-proof checks a proof written by `ledgerctl prove` with the checkpoints' verifier key\n" +
			"(from keygen) alone: the signatures and origin of the checkpoints, the entry's hash, and every\n" +
			"Merkle path (RFC 9162). A refused proof exits 1 with the reason.",
		Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			key, err := readKeyFile(pub, "--key", verifierKey)
			if err != nil {
				return err
			}
			b, err := readProofFile(args[0])
			if err != nil {
				return err
			}
			var head struct {
				Format string `json:"format"`
			}
			if err := json.Unmarshal(b, &head); err != nil {
				return invalidInputf("%s: not a proof: %v", args[0], err)
			}
			out := verifyProofJSON{OK: true, Format: head.Format}
			var text string
			switch head.Format {
			case audit.EntryProofFormat:
				p, err := audit.ParseEntryProof(b)
				if err != nil {
					return err
				}
				cp, e, err := audit.VerifyEntryProof(p, key)
				if err != nil {
					return err
				}
				out.Checkpoint, out.Chain, out.Seq = newCheckpointJSON(cp, nil), e.Chain, e.Seq
				text = fmt.Sprintf("proof holds: %s seq %d (hash %s) is in checkpoint %s of %s, root %x\n",
					e.Chain, e.Seq, e.Hash, cp.Origin, plural(int64(cp.Size), "chain", "chains"), cp.Root)
			case audit.ConsistencyProofFormat:
				p, err := audit.ParseConsistencyProof(b)
				if err != nil {
					return err
				}
				old, newer, err := audit.VerifyConsistencyProof(p, key)
				if err != nil {
					return err
				}
				oj := newCheckpointJSON(old, nil)
				out.Old, out.Checkpoint, out.Chains = &oj, newCheckpointJSON(newer, nil), len(p.Chains)
				text = fmt.Sprintf("proof holds: checkpoint %s of %s (root %x) extends the one of %s (root %x): every old chain is a prefix of its new self\n",
					newer.Origin, plural(int64(newer.Size), "chain", "chains"), newer.Root, plural(int64(old.Size), "chain", "chains"), old.Root)
			default:
				return invalidInputf("%s: format %q is neither %s nor %s", args[0], head.Format, audit.EntryProofFormat, audit.ConsistencyProofFormat)
			}
			return a.print(cmd, out, func(w io.Writer) error {
				_, err := io.WriteString(w, text)
				return err
			})
		},
	}
	cmd.Flags().StringVar(&pub, "key", "", "the checkpoints' verifier key file (from keygen)")
	return cmd
}
