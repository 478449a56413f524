package storage

import "context"

// NotifyChannelLengthMax is the longest channel name of a notification;
// names are lowercase ASCII letters, digits and "_".
const NotifyChannelLengthMax = 63

// TxNotifier is implemented by a writable Tx that can tell other
// processes of its commit (PostgreSQL: NOTIFY, which the server delivers
// when, and only if, the transaction commits). Listeners learn that
// something was committed on the channel, nothing more: they read what
// changed themselves.
type TxNotifier interface {
	// Notify queues a notification on the channel, sent with the commit.
	Notify(ctx context.Context, channel string) error
}

// Listener is implemented by a Backend whose commits other processes can
// hear of (PostgreSQL: LISTEN). A store with one writing process needs no
// Listener: the engine tells its own subscribers of its own commits.
type Listener interface {
	// Listen calls notify after every notification on the channel (and
	// after a lost connection is restored, when one may have been missed),
	// from one goroutine, until ctx ends. It returns once listening has
	// begun, or with the error that kept it from beginning.
	Listen(ctx context.Context, channel string, notify func()) error
}
