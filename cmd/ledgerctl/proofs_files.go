package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/ledgerworks/ledger/audit"
	"github.com/ledgerworks/ledger/checkpoint"
)

// keyFileSizeMax bounds a key file.
const keyFileSizeMax = 4096

// keyKind says which of keygen's two files a flag wants.
type keyKind int

const (
	signingKey keyKind = iota
	verifierKey
)

// readKeyFile reads a signing or verifier key written by keygen: one line.
// A file that holds no key of the kind wanted (the .pub given to sign, a
// damaged file) is invalid input, exit 2, naming the flag and the file.
func readKeyFile(name, flag string, kind keyKind) (string, error) {
	if name == "" {
		return "", usageErrorf("%s FILE is required", flag)
	}
	b, err := readBounded(name, keyFileSizeMax)
	if err != nil {
		return "", err
	}
	key := strings.TrimSpace(string(b))
	check, want := checkpoint.CheckVerifierKey, "a verifier key (the .pub file of keygen)"
	if kind == signingKey {
		check, want = checkpoint.CheckSignerKey, "a signing key (the private file of keygen)"
	}
	if _, err := check(key); err != nil {
		return "", invalidInputf("%s %s: not %s: %v", flag, name, want, err)
	}
	return key, nil
}

// readProofFile reads a checkpoint or proof file, bounded.
func readProofFile(name string) ([]byte, error) {
	return readBounded(name, audit.ProofFileSizeMax)
}

func readBounded(name string, sizeMax int64) ([]byte, error) {
	f, err := os.Open(name)
	if err != nil {
		if os.IsNotExist(err) {
			return nil, invalidInputf("%s: no such file", name)
		}
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, sizeMax+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > sizeMax {
		return nil, invalidInputf("%s: larger than %d bytes", name, sizeMax)
	}
	return b, nil
}

// writeFileAtomic writes b to name through a temporary file in the same
// folder, so that a reader never sees half a checkpoint.
func writeFileAtomic(name string, b []byte, perm os.FileMode) error {
	tmp, err := os.CreateTemp(filepath.Dir(name), "."+filepath.Base(name)+".*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(b); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Chmod(perm); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), name)
}

// checkpointJSON describes a checkpoint in -o json.
type checkpointJSON struct {
	Origin string `json:"origin"`
	Size   uint64 `json:"size"`
	Root   string `json:"root"`
	// Note is the signed note.
	Note string `json:"note,omitempty"`
}

func newCheckpointJSON(cp checkpoint.Checkpoint, signed []byte) checkpointJSON {
	return checkpointJSON{Origin: cp.Origin, Size: cp.Size, Root: fmt.Sprintf("%x", cp.Root), Note: string(signed)}
}
