package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/ledgerworks/ledger/storage"
)

var (
	_ storage.TxNotifier = (*tx)(nil)
	_ storage.Listener   = (*Backend)(nil)
)

// sqlNotify sends a notification; the server delivers it at COMMIT, and
// only if the transaction commits. Notifications of one transaction on one
// channel are folded into one by the server.
const sqlNotify = "SELECT pg_notify($1, '')"

// Notify queues a NOTIFY on the channel, sent in the commit's round trip.
func (t *tx) Notify(ctx context.Context, channel string) error {
	if err := t.usable(); err != nil {
		return err
	}
	if !t.writable {
		return storage.ErrReadOnly
	}
	for _, c := range t.notifies {
		if c == channel {
			return nil
		}
	}
	t.notifies = append(t.notifies, channel)
	return nil
}

func (t *tx) queueNotifies(b *pgx.Batch) {
	for _, c := range t.notifies {
		b.Queue(sqlNotify, c)
	}
}

// listenRetryMax bounds the wait between attempts to listen again after
// the listening connection failed.
const listenRetryMax = 5 * time.Second

// Listen holds one connection of its own, outside the pool's count of
// transactions, and LISTENs on the channel until ctx ends. After a lost
// connection it listens again on a new one and calls notify once, since a
// notification may have been missed meanwhile.
func (b *Backend) Listen(ctx context.Context, channel string, notify func()) error {
	conn, err := b.listenConn(ctx, channel)
	if err != nil {
		return err
	}
	go func() {
		defer func() {
			if conn != nil {
				conn.Close(context.Background())
			}
		}()
		wait := 10 * time.Millisecond
		for ctx.Err() == nil {
			if conn == nil {
				if conn, err = b.listenConn(ctx, channel); err != nil {
					conn = nil
					select {
					case <-ctx.Done():
					case <-time.After(wait):
					}
					wait = min(2*wait, listenRetryMax)
					continue
				}
				wait = 10 * time.Millisecond
				notify()
			}
			if _, err := conn.WaitForNotification(ctx); err != nil {
				conn.Close(context.Background())
				conn = nil
				continue
			}
			notify()
		}
	}()
	return nil
}

// listenConn takes a connection out of the pool and listens on it.
func (b *Backend) listenConn(ctx context.Context, channel string) (*pgx.Conn, error) {
	pc, err := b.pool.Acquire(ctx)
	if err != nil {
		return nil, fmt.Errorf("postgres: listen: %w", classify(err, false))
	}
	conn := pc.Hijack()
	if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{channel}.Sanitize()); err != nil {
		conn.Close(context.Background())
		return nil, fmt.Errorf("postgres: listen: %w", classify(err, false))
	}
	return conn, nil
}
