package bolt

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	bbolt "go.etcd.io/bbolt"
)

const upgradeCrashChildEnv = "LEDGER_BOLT_UPGRADE_CRASH_CHILD"

// TestCrashDuringUpgrade kills (SIGKILL) a process while it upgrades a
// FormatV2 file, in small transactions, at three moments or more: the file then
// reads every entry read-only, whether it is halfway or not, and a writable
// open finishes the upgrade with every entry intact and bbolt's check
// passing. At least one kill must land halfway.
func TestCrashDuringUpgrade(t *testing.T) {
	if path := os.Getenv(upgradeCrashChildEnv); path != "" {
		upgradeBatchBytes = 4 << 10
		fmt.Println("opening")
		b, err := Open(path, Options{Log: LogOff})
		if err != nil {
			fmt.Println(err)
			os.Exit(1)
		}
		b.Close()
		fmt.Println("upgraded")
		os.Exit(0)
	}
	folder := t.TempDir()
	original := filepath.Join(folder, "v2.db")
	want := writeFormatV2File(t, original, 6, 1500)
	// A child that is not killed times the whole open; the kills land at a
	// quarter, a half and three quarters of it.
	timed := filepath.Join(folder, "timed.db")
	copyTestFile(t, original, timed)
	whole := killUpgradeChild(t, timed, time.Minute)
	// Under load a killed child may run slower or faster than the timed
	// one: the rounds go on, at other fractions, until one kill has landed
	// halfway (at most eight rounds).
	fractions := []time.Duration{2, 4, 6, 3, 5, 1, 7, 4}
	halfway := 0
	for round := 0; round < len(fractions) && (round < 3 || halfway == 0); round++ {
		path := filepath.Join(folder, fmt.Sprintf("round%d.db", round))
		copyTestFile(t, original, path)
		killUpgradeChild(t, path, whole*fractions[round]/8)
		if upgradeBucketLeft(t, path) {
			halfway++
		}
		ro, err := Open(path, Options{ReadOnly: true})
		if err != nil {
			t.Fatalf("round %d: read-only open after the kill: %v", round, err)
		}
		checkEntries(t, ro, want)
		ro.Close()
		b, err := Open(path, Options{Log: LogOff})
		if err != nil {
			t.Fatalf("round %d: writable open after the kill: %v", round, err)
		}
		if got := fileFormat(t, b); got != Format {
			t.Fatalf("round %d: format %q after the writable open", round, got)
		}
		checkEntries(t, b, want)
		if err := b.Check(); err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		b.Close()
	}
	if halfway == 0 {
		t.Fatal("no kill landed halfway through the upgrade")
	}
	t.Logf("%d kills landed halfway through the upgrade", halfway)
}

// killUpgradeChild starts the child on path and kills it delay after it
// began its open, unless it has finished by then; it returns how long the
// child ran after it began its open.
func killUpgradeChild(t *testing.T, path string, delay time.Duration) time.Duration {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestCrashDuringUpgrade$")
	cmd.Env = append(os.Environ(), upgradeCrashChildEnv+"="+path)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := bufio.NewScanner(stdout)
	if !lines.Scan() || lines.Text() != "opening" {
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatalf("the child said %q before its open", lines.Text())
	}
	began := time.Now()
	finished := make(chan struct{})
	go func() {
		io.Copy(io.Discard, stdout)
		close(finished)
	}()
	select {
	case <-time.After(delay):
		cmd.Process.Signal(syscall.SIGKILL)
		<-finished
	case <-finished:
	}
	ran := time.Since(began)
	cmd.Wait()
	return ran
}

// upgradeBucketLeft reports whether the file holds an upgrade in progress.
func upgradeBucketLeft(t *testing.T, path string) bool {
	t.Helper()
	raw, err := bbolt.Open(path, FileMode, &bbolt.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	left := false
	raw.View(func(btx *bbolt.Tx) error {
		left = btx.Bucket(bucketUpgrade) != nil && string(btx.Bucket(BucketMeta).Get(metaFormat)) == FormatV2
		return nil
	})
	return left
}

func copyTestFile(t *testing.T, from, to string) {
	t.Helper()
	data, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, data, FileMode); err != nil {
		t.Fatal(err)
	}
}
