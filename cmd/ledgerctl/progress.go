package main

import (
	"os"
	"time"

	"github.com/schollz/progressbar/v3"
	"github.com/spf13/cobra"
	"golang.org/x/term"
)

// progressThrottle is the shortest time between two redraws of a bar.
const progressThrottle = 100 * time.Millisecond

// progress draws a bar on stderr when stderr is a terminal, and does nothing
// otherwise, so piped and redirected runs stay silent. The zero value (and a
// nil *progress) does nothing.
type progress struct {
	bar *progressbar.ProgressBar
}

// newProgress starts a bar counting entries; total is -1 when unknown.
func newProgress(cmd *cobra.Command, description string, total int64) *progress {
	f, ok := cmd.ErrOrStderr().(*os.File)
	if !ok || !term.IsTerminal(int(f.Fd())) {
		return &progress{}
	}
	bar := progressbar.NewOptions64(total,
		progressbar.OptionSetWriter(f),
		progressbar.OptionSetDescription(description),
		progressbar.OptionShowCount(),
		progressbar.OptionSetItsString("entries"),
		progressbar.OptionShowIts(),
		progressbar.OptionThrottle(progressThrottle),
		progressbar.OptionClearOnFinish(),
		progressbar.OptionSetWidth(30),
	)
	return &progress{bar: bar}
}

// set moves the bar to n entries.
func (p *progress) set(n int64) {
	if p == nil || p.bar == nil {
		return
	}
	_ = p.bar.Set64(n) // drawing errors must not fail the command
}

// finish removes the bar.
func (p *progress) finish() {
	if p == nil || p.bar == nil {
		return
	}
	_ = p.bar.Finish()
}
