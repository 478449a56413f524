package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// demoProgram is how the demo's closing suggestions start ledgerctl, so that
// they work as printed: "ledgerctl" when that name on PATH is the running
// program, "go run ./cmd/ledgerctl" when the program was built by go run
// (it lives in the go command's build folders), else the path it was
// started with.
func demoProgram() string {
	executable, err := os.Executable()
	if err != nil {
		executable = os.Args[0]
	}
	return chooseDemoProgram(executable, os.Args[0], exec.LookPath)
}

// chooseDemoProgram is demoProgram's rule, with its inputs given.
func chooseDemoProgram(executable, invoked string, lookPath func(string) (string, error)) string {
	if onPath, err := lookPath("ledgerctl"); err == nil && sameExecutable(onPath, executable) {
		return "ledgerctl"
	}
	if strings.Contains(filepath.ToSlash(executable), "/go-build") {
		return "go run ./cmd/ledgerctl"
	}
	return shellQuote(invoked)
}

// sameExecutable reports whether two paths name one file.
func sameExecutable(a, b string) bool {
	infoA, errA := os.Stat(a)
	infoB, errB := os.Stat(b)
	return errA == nil && errB == nil && os.SameFile(infoA, infoB)
}
