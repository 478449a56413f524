package postgres_test

import (
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"net/url"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ledgerworks/ledger/storage"
	"github.com/ledgerworks/ledger/storage/postgres"
	"github.com/ledgerworks/ledger/storage/postgres/pgtest"
)

// backendPID returns the process id of the session that holds row locks on
// the chains table of schema: the session of the one open writable
// transaction of the test.
func backendPID(t *testing.T, dbURL, schema string) uint32 {
	t.Helper()
	ctx := context.Background()
	conn, err := pgtest.Connect(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var pids []uint32
	rows, err := conn.Query(ctx, `SELECT DISTINCT l.pid FROM pg_locks l
		JOIN pg_class c ON c.oid = l.relation JOIN pg_namespace n ON n.oid = c.relnamespace
		WHERE n.nspname = $1 AND c.relname = 'chains' AND l.mode = 'RowShareLock' AND l.granted`, schema)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var pid int32
		if err := rows.Scan(&pid); err != nil {
			t.Fatal(err)
		}
		pids = append(pids, uint32(pid))
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if len(pids) != 1 {
		t.Fatalf("sessions holding chain heads in %s: %v, want one", schema, pids)
	}
	return pids[0]
}

func terminate(t *testing.T, dbURL string, pid uint32) {
	t.Helper()
	ctx := context.Background()
	conn, err := pgtest.Connect(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var ok bool
	if err := conn.QueryRow(ctx, "SELECT pg_terminate_backend($1)", int32(pid)).Scan(&ok); err != nil || !ok {
		t.Fatalf("pg_terminate_backend(%d) = %v, %v", pid, ok, err)
	}
}

// TestTerminatedMidTransaction kills the session of a multi-chain
// transaction from another session, at each step of the transaction: what
// was acknowledged before stays, nothing of the killed transaction appears,
// and the error says the transaction can be run again.
func TestTerminatedMidTransaction(t *testing.T) {
	steps := []string{"after lock", "after buffered appends", "after flush", "before commit with state"}
	for _, step := range steps {
		t.Run(step, func(t *testing.T) {
			dbURL := pgtest.URL(t)
			schema := pgtest.NewSchema(t, dbURL)
			ctx := context.Background()
			b, err := postgres.Open(ctx, dbURL, postgres.Options{Schema: schema})
			if err != nil {
				t.Fatal(err)
			}
			defer b.Close()
			appendN(t, b, "a", 0, 2, true)
			appendN(t, b, "b", 0, 2, true)

			tx, err := b.Begin(ctx, true)
			if err != nil {
				t.Fatal(err)
			}
			defer tx.Rollback()
			for _, c := range []string{"a", "b"} {
				if _, err := tx.LookupKey(ctx, c, "k3"); !errors.Is(err, storage.ErrNotFound) {
					t.Fatal(err)
				}
			}
			pid := backendPID(t, dbURL, schema)
			var opErr error
			if step == "after lock" {
				terminate(t, dbURL, pid)
				opErr = tx.Append(ctx, "a", rec(3, "k3"), head(3))
				if opErr == nil {
					opErr = tx.Append(ctx, "b", rec(3, "k3"), head(3))
				}
			} else {
				for _, c := range []string{"a", "b"} {
					if err := tx.Append(ctx, c, rec(3, "k3"), head(3)); err != nil {
						t.Fatal(err)
					}
				}
				switch step {
				case "after flush":
					for _, err := range tx.Chains(ctx, "") { // flushes the appends
						if err != nil {
							t.Fatal(err)
						}
					}
				case "before commit with state":
					if err := tx.StatePut(ctx, []byte("s"), []byte("v")); err != nil {
						t.Fatal(err)
					}
				}
				terminate(t, dbURL, pid)
			}
			commitErr := tx.Commit()
			err = errors.Join(opErr, commitErr)
			if commitErr == nil {
				t.Fatalf("commit on a terminated session succeeded (op error %v)", opErr)
			}
			if !errors.Is(err, postgres.ErrRetryable) || !errors.Is(err, storage.ErrIO) {
				t.Fatalf("error = %v, want ErrRetryable wrapping storage.ErrIO", err)
			}
			t.Logf("error: %v", err)

			// The acknowledged entries are there, nothing else.
			checkChain(t, b, "a", 2)
			checkChain(t, b, "b", 2)
			view, _ := b.Begin(ctx, false)
			defer view.Rollback()
			if _, err := view.StateGet(ctx, []byte("s")); !errors.Is(err, storage.ErrNotFound) {
				t.Fatalf("state of the killed transaction: %v", err)
			}
			// The same transaction, run again, commits.
			appendN(t, b, "a", 2, 1, true)
			appendN(t, b, "b", 2, 1, true)
			checkChain(t, b, "a", 3)
			checkChain(t, b, "b", 3)
		})
	}
}

// cutProxy forwards TCP connections to a PostgreSQL server and can cut one
// of them at the commit: either before the server receives the next
// message ("drop"), or after the server has received and answered it, so
// that the client never sees the answer ("deliver").
type cutProxy struct {
	ln     net.Listener
	target string
	refuse atomic.Bool // refuse new connections
	mu     sync.Mutex
	conns  map[uint32]*proxied // by server process id
	all    []net.Conn
}

const (
	modeForward int32 = iota
	modeDrop
	modeDeliver
)

type proxied struct {
	client net.Conn
	mode   atomic.Int32
}

func newCutProxy(t *testing.T, target string) *cutProxy {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &cutProxy{ln: ln, target: target, conns: make(map[uint32]*proxied)}
	go p.serve()
	t.Cleanup(func() {
		ln.Close()
		p.mu.Lock()
		defer p.mu.Unlock()
		for _, c := range p.all {
			c.Close()
		}
	})
	return p
}

func (p *cutProxy) serve() {
	for {
		client, err := p.ln.Accept()
		if err != nil {
			return
		}
		if p.refuse.Load() {
			client.Close()
			continue
		}
		server, err := net.Dial("tcp", p.target)
		if err != nil {
			client.Close()
			continue
		}
		p.mu.Lock()
		p.all = append(p.all, client, server)
		p.mu.Unlock()
		pc := &proxied{client: client}
		go p.clientToServer(pc, server)
		go p.serverToClient(pc, server)
	}
}

func (p *cutProxy) clientToServer(pc *proxied, server net.Conn) {
	buf := make([]byte, 64<<10)
	for {
		n, err := pc.client.Read(buf)
		if n > 0 {
			if pc.mode.Load() == modeDrop {
				pc.client.Close() // the server keeps waiting for the message
				return
			}
			if _, err := server.Write(buf[:n]); err != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// serverToClient forwards the server's messages, noting the process id
// from BackendKeyData ('K') at startup. When the server closes, so does the
// client side (a cancel request's connection waits for that).
func (p *cutProxy) serverToClient(pc *proxied, server net.Conn) {
	defer pc.client.Close()
	hdr := make([]byte, 5)
	for {
		if _, err := io.ReadFull(server, hdr); err != nil {
			return
		}
		body := make([]byte, binary.BigEndian.Uint32(hdr[1:])-4)
		if _, err := io.ReadFull(server, body); err != nil {
			return
		}
		if pc.mode.Load() == modeDeliver {
			pc.client.Close() // the server answered; the client never hears it
			return
		}
		if hdr[0] == 'K' && len(body) >= 4 {
			p.mu.Lock()
			p.conns[binary.BigEndian.Uint32(body)] = pc
			p.mu.Unlock()
		}
		if _, err := pc.client.Write(append(hdr, body...)); err != nil {
			return
		}
	}
}

func (p *cutProxy) arm(t *testing.T, pid uint32, mode int32) {
	p.mu.Lock()
	defer p.mu.Unlock()
	pc, ok := p.conns[pid]
	if !ok {
		t.Fatalf("no proxied connection for session %d", pid)
	}
	pc.mode.Store(mode)
}

func (p *cutProxy) url(t *testing.T, dbURL string) string {
	u, err := url.Parse(dbURL)
	if err != nil {
		t.Fatal(err)
	}
	u.Host = p.ln.Addr().String()
	return u.String()
}

// TestLostCommit cuts the connection while COMMIT is in flight. Commit
// must tell the truth: nil only if the transaction committed, ErrRetryable
// only if it did not, ErrCommitUnknown when it cannot find out.
func TestLostCommit(t *testing.T) {
	cases := []struct {
		name       string
		mode       int32
		refuse     bool // the server cannot be reached afterwards
		wantErr    error
		wantStored bool
	}{
		{"answer lost", modeDeliver, false, nil, true},
		{"commit lost", modeDrop, false, postgres.ErrRetryable, false},
		{"server unreachable", modeDrop, true, postgres.ErrCommitUnknown, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dbURL := pgtest.URL(t)
			u, err := url.Parse(dbURL)
			if err != nil {
				t.Fatal(err)
			}
			proxy := newCutProxy(t, u.Host)
			schema := pgtest.NewSchema(t, dbURL)
			ctx := context.Background()
			b, err := postgres.Open(ctx, proxy.url(t, dbURL), postgres.Options{Schema: schema, CommitTimeout: 3 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			defer b.Close()
			appendN(t, b, "a", 0, 1, false)

			tx, err := b.Begin(ctx, true)
			if err != nil {
				t.Fatal(err)
			}
			for _, ch := range []string{"a", "b"} {
				h, err := tx.Head(ctx, ch)
				if err != nil && !errors.Is(err, storage.ErrNotFound) {
					t.Fatal(err)
				}
				if err := tx.Append(ctx, ch, rec(h.Seq+1, "k"), head(h.Seq+1)); err != nil {
					t.Fatal(err)
				}
			}
			proxy.arm(t, backendPID(t, dbURL, schema), c.mode)
			proxy.refuse.Store(c.refuse)
			start := time.Now()
			err = tx.Commit()
			t.Logf("commit after %v: %v", time.Since(start).Round(time.Millisecond), err)
			switch {
			case c.wantErr == nil && err != nil:
				t.Fatalf("commit = %v, want nil", err)
			case c.wantErr != nil && !errors.Is(err, c.wantErr):
				t.Fatalf("commit = %v, want %v", err, c.wantErr)
			}

			// Read back directly: the outcome matches what Commit said.
			check, err := postgres.Open(ctx, dbURL, postgres.Options{Schema: schema})
			if err != nil {
				t.Fatal(err)
			}
			defer check.Close()
			if c.refuse {
				// Wait until the cut session is gone for certain.
				waitAborted(t, dbURL, schema)
			}
			want := map[bool]uint64{true: 2, false: 1}[c.wantStored]
			checkChain(t, check, "a", want)
			view, _ := check.Begin(ctx, false)
			defer view.Rollback()
			_, err = view.Head(ctx, "b")
			if c.wantStored != (err == nil) {
				t.Fatalf("chain b: %v, stored = %v", err, c.wantStored)
			}
		})
	}
}

// waitAborted terminates whatever session still holds the schema's heads.
func waitAborted(t *testing.T, dbURL, schema string) {
	t.Helper()
	ctx := context.Background()
	conn, err := pgtest.Connect(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	for range 100 {
		var n int
		err := conn.QueryRow(ctx, `SELECT count(pg_terminate_backend(l.pid)) FROM pg_locks l
			JOIN pg_class c ON c.oid = l.relation JOIN pg_namespace n ON n.oid = c.relnamespace
			WHERE n.nspname = $1 AND c.relname = 'chains'`, schema).Scan(&n)
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("sessions of %s did not end", schema)
}
