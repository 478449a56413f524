// Command vectorgen writes the Format v1 test vectors (testdata/vectors) and
// the chain package's fuzz seed corpora (chain/testdata/fuzz). Run it from
// the module root after a change to the format or to the vectors:
//
//	go run ./chain/internal/vectorgen
//
// It removes generated files that it no longer produces, so the committed
// tree is exactly its output.
package main

import (
	"bytes"
	"flag"
	"fmt"
	"io/fs"
	"log"
	"os"
	"path/filepath"
	"strings"

	"github.com/ledgerworks/ledger/chain/internal/vectors"
)

func main() {
	root := flag.String("root", ".", "module root to write under")
	flag.Parse()
	if _, err := os.Stat(filepath.Join(*root, "go.mod")); err != nil {
		log.Fatalf("%s is not the module root: %v", *root, err)
	}
	files := vectors.Files()
	written, removed := 0, 0
	for name, content := range files {
		target := filepath.Join(*root, filepath.FromSlash(name))
		if old, err := os.ReadFile(target); err == nil && bytes.Equal(old, content) {
			continue
		}
		if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
			log.Fatal(err)
		}
		if err := os.WriteFile(target, content, 0o644); err != nil {
			log.Fatal(err)
		}
		written++
	}
	// Stale vectors go; of the fuzz corpora only the generated seeds
	// (named vector-*) are managed here, so that inputs the fuzzer saved
	// stay.
	for _, dir := range []string{vectors.VectorsDir, vectors.FuzzDir} {
		err := filepath.WalkDir(filepath.Join(*root, dir), func(p string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			rel, err := filepath.Rel(*root, p)
			if err != nil {
				return err
			}
			rel = filepath.ToSlash(rel)
			managed := dir == vectors.VectorsDir || isGeneratedSeed(rel)
			if _, ok := files[rel]; !ok && managed {
				removed++
				return os.Remove(p)
			}
			return nil
		})
		if err != nil && !os.IsNotExist(err) {
			log.Fatal(err)
		}
	}
	fmt.Printf("%d files generated, %d written, %d stale removed\n", len(files), written, removed)
}

// isGeneratedSeed reports whether a fuzz corpus file is one vectorgen writes.
func isGeneratedSeed(rel string) bool {
	return strings.HasPrefix(filepath.Base(rel), vectors.SeedPrefix)
}
