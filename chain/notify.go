package chain

import (
	"context"
	"fmt"
	"sync"

	"github.com/ledgerworks/ledger/storage"
)

// Notify asks the engine to tell the channel's subscribers (DB.Subscribe)
// that this transaction committed: in this process once the commit is
// durable, and in other processes too on a backend that is a
// storage.Listener (PostgreSQL: NOTIFY, sent with the commit). Nothing is
// sent when the transaction fails or rolls back. A channel name is at most
// storage.NotifyChannelLengthMax lowercase letters, digits and "_".
func (tx *Tx) Notify(channel string) error {
	if !tx.stx.Writable() {
		return ErrReadOnly
	}
	if err := validateChannel(channel); err != nil {
		return err
	}
	if tx.notes != nil {
		*tx.notes = append(*tx.notes, channel)
	}
	if n, ok := tx.stx.(storage.TxNotifier); ok {
		return tx.failed(n.Notify(tx.ctx, channel))
	}
	return nil
}

func validateChannel(channel string) error {
	if channel == "" || len(channel) > storage.NotifyChannelLengthMax {
		return &InvalidError{Field: "channel", Err: ErrInvalid, Reason: fmt.Sprintf("channel %q: want 1..%d bytes", channel, storage.NotifyChannelLengthMax)}
	}
	for _, c := range []byte(channel) {
		if !('a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '_') {
			return &InvalidError{Field: "channel", Err: ErrInvalid, Reason: fmt.Sprintf("channel %q: only a-z, 0-9 and _", channel)}
		}
	}
	return nil
}

// Subscription receives a value on C after commits that notified its
// channel. Notifications coalesce: one value may stand for many commits,
// and a subscriber reads what changed itself. Close it when done.
type Subscription struct {
	// C receives a value after one or more notifications.
	C       <-chan struct{}
	c       chan struct{}
	db      *DB
	channel string
	once    sync.Once
}

// notifier is the DB's table of subscriptions.
type notifier struct {
	mu   sync.Mutex
	subs map[string]map[*Subscription]struct{}
	// listening holds, per channel, the end of a backend Listen shared by
	// the channel's subscribers.
	listening map[string]context.CancelFunc
}

// Subscribe returns a subscription to the channel. On a backend that is a
// storage.Listener it also hears of other processes' commits.
func (db *DB) Subscribe(ctx context.Context, channel string) (*Subscription, error) {
	if err := validateChannel(channel); err != nil {
		return nil, err
	}
	if err := db.enter(); err != nil {
		return nil, err
	}
	defer db.mu.RUnlock()
	c := make(chan struct{}, 1)
	s := &Subscription{C: c, c: c, db: db, channel: channel}
	n := &db.notes
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.subs == nil {
		n.subs = map[string]map[*Subscription]struct{}{}
		n.listening = map[string]context.CancelFunc{}
	}
	if n.subs[channel] == nil {
		n.subs[channel] = map[*Subscription]struct{}{}
	}
	n.subs[channel][s] = struct{}{}
	if l, ok := db.backend.(storage.Listener); ok && n.listening[channel] == nil {
		lctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
		if err := l.Listen(lctx, channel, func() { db.fire(channel) }); err != nil {
			cancel()
			delete(n.subs[channel], s)
			return nil, storageError(err)
		}
		n.listening[channel] = cancel
	}
	return s, nil
}

// Close ends the subscription.
func (s *Subscription) Close() {
	s.once.Do(func() {
		n := &s.db.notes
		n.mu.Lock()
		defer n.mu.Unlock()
		delete(n.subs[s.channel], s)
		if len(n.subs[s.channel]) == 0 {
			delete(n.subs, s.channel)
			if cancel := n.listening[s.channel]; cancel != nil {
				cancel()
				delete(n.listening, s.channel)
			}
		}
	})
}

// fire wakes the channel's subscribers.
func (db *DB) fire(channel string) {
	n := &db.notes
	n.mu.Lock()
	defer n.mu.Unlock()
	for s := range n.subs[channel] {
		select {
		case s.c <- struct{}{}:
		default:
		}
	}
}

// fireNotes wakes the subscribers of the channels a committed request
// notified.
func (db *DB) fireNotes(channels []string) {
	for i, c := range channels {
		if i > 0 && channels[i-1] == c {
			continue
		}
		db.fire(c)
	}
}

// closeNotes ends the backend listens at Close.
func (db *DB) closeNotes() {
	n := &db.notes
	n.mu.Lock()
	defer n.mu.Unlock()
	for c, cancel := range n.listening {
		cancel()
		delete(n.listening, c)
	}
}
