package outbox

import (
	"encoding/hex"
	"sync"
	"sync/atomic"

	"github.com/zeebo/blake3"

	"github.com/ledgerworks/ledger/chain"
)

// Channel is the notification channel (chain.Tx.Notify) a topic's
// enqueues, and the deliveries that make a message ready, notify on
// commit: "outbox_" and 16 hex digits of a digest of tenant and topic.
func Channel(tenant, topic string) string {
	key := tenant + "/" + topic
	if c, ok := channels.Load(key); ok {
		return c.(string)
	}
	sum := blake3.Sum256([]byte("ledger/outbox/channel/v1\x00" + key))
	c := "outbox_" + hex.EncodeToString(sum[:8])
	if channelsCached.Add(1) <= channelsCachedMax {
		channels.Store(key, c)
	}
	return c
}

// channels caches Channel's names, at most channelsCachedMax of them.
var (
	channels       sync.Map
	channelsCached atomic.Int64
)

const channelsCachedMax = 10_000

// notify wakes the topic's workers when tx commits. A notification is a
// hint (workers poll as well), so its failure fails nothing.
func notify(tx *chain.Tx, tenant, topic string) {
	_ = tx.Notify(Channel(tenant, topic))
}
