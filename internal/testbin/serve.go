package testbin

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Served is a `ledgerctl serve` child process, started by StartServe or
// Serve.
type Served struct {
	URL  string // from its first line: http://ADDR
	Addr string // ADDR

	cmd    *exec.Cmd
	done   chan struct{} // closed once the process has been waited for
	err    error         // cmd.Wait's, once done is closed
	mu     sync.Mutex
	output bytes.Buffer // its stdout after the first line, and its stderr
}

// StartServe runs the built ledgerctl with args, a serve command line
// (with --addr, 127.0.0.1:0 for any port), in the environment env (nil:
// this process's with LEDGER_DB emptied), and waits up to wait for its
// first line, "listening on http://ADDR". It is safe from any goroutine
// once Ledgerctl has built the binary: it returns its failure, the child
// killed, instead of ending a test. The caller kills the child it returns.
func StartServe(env []string, wait time.Duration, args ...string) (*Served, error) {
	bin := Built()
	if bin == "" {
		return nil, errors.New("ledgerctl is not built: call testbin.Ledgerctl on the test's goroutine first")
	}
	cmd := exec.Command(bin, args...)
	cmd.Env = env
	if env == nil {
		cmd.Env = append(os.Environ(), "LEDGER_DB=")
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	s := &Served{cmd: cmd, done: make(chan struct{})}
	cmd.Stderr = (*servedOutput)(s)
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	first := make(chan string, 1)
	go func() {
		r := bufio.NewReader(stdout)
		line, _ := r.ReadString('\n')
		first <- line
		_, _ = io.Copy((*servedOutput)(s), r)
		s.err = cmd.Wait()
		close(s.done)
	}()
	select {
	case line := <-first:
		url, ok := strings.CutPrefix(strings.TrimSpace(line), "listening on ")
		if !ok || !strings.HasPrefix(url, "http://") {
			s.Kill()
			return nil, fmt.Errorf("ledgerctl serve printed %q first, want \"listening on http://ADDR\"\n%s", line, s.Output())
		}
		s.URL, s.Addr = url, strings.TrimPrefix(url, "http://")
	case <-time.After(wait):
		s.Kill()
		return nil, fmt.Errorf("ledgerctl serve did not start within %v\n%s", wait, s.Output())
	}
	return s, nil
}

// Serve is StartServe on the test's goroutine: it builds ledgerctl first,
// ends the test on a failure, and kills the child at cleanup.
func Serve(t testing.TB, env []string, wait time.Duration, args ...string) *Served {
	t.Helper()
	Ledgerctl(t)
	s, err := StartServe(env, wait, args...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Kill)
	return s
}

type servedOutput Served

func (w *servedOutput) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.output.Write(p)
}

// Output returns what the server wrote after its first line.
func (s *Served) Output() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.output.String()
}

// Pid is the child's process id.
func (s *Served) Pid() int { return s.cmd.Process.Pid }

// Kill ends the server with SIGKILL (no shutdown, no flush, no release of
// anything) and waits for it; it does nothing to a server that has ended.
func (s *Served) Kill() {
	_ = s.cmd.Process.Signal(syscall.SIGKILL)
	<-s.done
}

// Stop sends SIGTERM and waits up to wait for the server's graceful
// shutdown; it fails when the server does not end in time (it is killed
// then) or ends with another exit status than 0.
func (s *Served) Stop(wait time.Duration) error {
	if err := s.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		return err
	}
	select {
	case <-s.done:
	case <-time.After(wait):
		s.Kill()
		return fmt.Errorf("ledgerctl serve did not stop within %v of SIGTERM\n%s", wait, s.Output())
	}
	if s.err != nil {
		return fmt.Errorf("ledgerctl serve exited with %v after SIGTERM\n%s", s.err, s.Output())
	}
	return nil
}
