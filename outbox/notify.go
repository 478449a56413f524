package outbox

import (
	"encoding/hex"

	"github.com/zeebo/blake3"

	"github.com/ledgerworks/ledger/chain"
)

// Channel is the notification channel (chain.Tx.Notify) a topic's
// enqueues, and the deliveries that make a message ready, notify on
// commit: "outbox_" and 16 hex digits of a digest of tenant and topic.
func Channel(tenant, topic string) string {
	sum := blake3.Sum256([]byte("ledger/outbox/channel/v1\x00" + tenant + "/" + topic))
	return "outbox_" + hex.EncodeToString(sum[:8])
}

// notify wakes the topic's workers when tx commits. A notification is a
// hint (workers poll as well), so its failure fails nothing.
func notify(tx *chain.Tx, tenant, topic string) {
	_ = tx.Notify(Channel(tenant, topic))
}
