package outbox

import (
	"encoding/binary"
	"encoding/hex"
	"strings"

	"github.com/zeebo/blake3"

	"github.com/ledgerworks/ledger/chain"
)

// Domain is the chain name component and state key prefix of the outbox.
const Domain = "outbox"

// The two chains of a topic: enqueues on one, the delivery history
// (leases, heartbeats, outcomes, dead letters, requeues) on the other, so
// that business transactions and workers contend on different heads.
const (
	messagesPart   = "messages"
	deliveriesPart = "deliveries"
)

// KeyPrefix starts the idempotency key a receiver is given: KeyPrefix+id.
const KeyPrefix = "outbox:"

// IDSize is the size of a message id in bytes; its text is twice as long.
const IDSize = 16

// ID identifies a message: the first IDSize bytes of
// BLAKE3-256("ledger/outbox/message/v1" || 0x00 || lp(tenant) || lp(topic)
// || lp(idempotency key)). It follows from the enqueue's key alone, so a
// retried enqueue names the same message before anything is written.
type ID [IDSize]byte

// String is the id as 32 lowercase hex digits.
func (id ID) String() string { return hex.EncodeToString(id[:]) }

// Key is the idempotency key every delivery attempt of the message
// carries: "outbox:" + id.
func (id ID) Key() string {
	var b [len(KeyPrefix) + 2*IDSize]byte
	hex.Encode(b[copy(b[:], KeyPrefix):], id[:])
	return string(b[:])
}

// ParseID parses the 32 hex digits of an id, with or without KeyPrefix.
func ParseID(s string) (ID, error) {
	var id ID
	s = strings.TrimPrefix(s, KeyPrefix)
	if len(s) != 2*IDSize {
		return id, invalid("id", ErrUnknownMessage, "message id %q: want %d hex digits", s, 2*IDSize)
	}
	if _, err := hex.Decode(id[:], []byte(s)); err != nil || strings.ToLower(s) != s {
		return id, invalid("id", ErrUnknownMessage, "message id %q: want lowercase hex", s)
	}
	return id, nil
}

// MessageID returns the id of the message a tenant enqueues on a topic
// with an idempotency key.
func MessageID(tenant, topic, key string) ID {
	h := blake3.New()
	h.Write([]byte("ledger/outbox/message/v1\x00"))
	for _, s := range []string{tenant, topic, key} {
		var n [4]byte
		binary.BigEndian.PutUint32(n[:], uint32(len(s)))
		h.Write(n[:])
		h.Write([]byte(s))
	}
	var sum [32]byte
	h.Sum(sum[:0])
	var id ID
	copy(id[:], sum[:])
	return id
}

// MessagesChain is the chain of a topic's enqueues:
// tenant/outbox/topic/messages.
func MessagesChain(tenant, topic string) (string, error) {
	return topicChain(tenant, topic, messagesPart)
}

// DeliveriesChain is the chain of a topic's delivery history:
// tenant/outbox/topic/deliveries.
func DeliveriesChain(tenant, topic string) (string, error) {
	return topicChain(tenant, topic, deliveriesPart)
}

func topicChain(tenant, topic, part string) (string, error) {
	if err := validateNames(tenant, topic); err != nil {
		return "", err
	}
	return chain.ScopedName(tenant, Domain, topic, part)
}

// ParseChain splits an outbox chain id; ok is false for any other chain.
func ParseChain(name string) (tenant, topic string, deliveries, ok bool) {
	parts := chain.SplitScopedName(name)
	if len(parts) != 4 || parts[1] != Domain || validateNames(parts[0], parts[2]) != nil {
		return "", "", false, false
	}
	switch parts[3] {
	case messagesPart:
		return parts[0], parts[2], false, true
	case deliveriesPart:
		return parts[0], parts[2], true, true
	}
	return "", "", false, false
}

func validateNames(tenant, topic string) error {
	if _, err := chain.ScopedName(tenant, Domain, topic); err != nil {
		return invalid("topic", ErrInvalidName, "tenant %q topic %q: %v", tenant, topic, err)
	}
	return nil
}

// Payload types of the outbox's entries.
const (
	TypeMessage   = "outbox.message/v1"   // messages chain: one enqueue
	TypeLease     = "outbox.lease/v1"     // deliveries chain: messages leased to a worker
	TypeHeartbeat = "outbox.heartbeat/v1" // deliveries chain: leases extended
	TypeOutcome   = "outbox.outcome/v1"   // deliveries chain: what attempts returned
	TypeDead      = "outbox.dead/v1"      // deliveries chain: messages dead-lettered
	TypeRequeue   = "outbox.requeue/v1"   // deliveries chain: dead messages requeued by an operator
)

// State keys, all under "outbox/<tenant>/":
//
//	m/<id>                                 the message's record
//	r/<topic>/<due><seq>                   ready index: pending messages, claimable once due,
//	                                       valued the id and a copy of the record (read
//	                                       with the index by a claim; the id alone when
//	                                       written before ready keys carried records)
//	l/<topic>/<deadline><entry seq>        lease index: one key per lease (or heartbeat) entry
//	                                       whose deadline some messages still hold, valued
//	                                       their count; claimable once the deadline passed
//	k/<topic>/<ordering key digest><seq>   one queue per ordering key, in enqueue order
//	d/<topic>/<seq>                        dead messages
//	f/<topic>/                             the ready index's floor (see floorKey)
//
// <due> is a big-endian unix-nano time with the sign bit flipped, <seq> the
// enqueue's seq on the messages chain, both 8 bytes, so that the indexes sort
// by time and enqueue order. Tenants and topics hold no "/", so no two of
// them share a prefix.
const (
	stateRecord = "m"
	stateReady  = "r"
	stateKeyQ   = "k"
	stateDead   = "d"
	stateFloor  = "f"
	stateLease  = "l"
)

func tenantPrefix(tenant string) []byte { return []byte(Domain + "/" + tenant + "/") }

func recordKey(tenant string, id ID) []byte {
	k := make([]byte, 0, len(Domain)+len(tenant)+len(stateRecord)+3+IDSize)
	k = append(append(append(k, Domain+"/"...), tenant...), '/')
	return append(append(k, stateRecord+"/"...), id[:]...)
}

func topicPrefix(tenant, kind, topic string) []byte {
	k := make([]byte, 0, len(Domain)+len(tenant)+len(kind)+len(topic)+4+16)
	k = append(append(append(k, Domain+"/"...), tenant...), '/')
	return append(append(append(append(k, kind...), '/'), topic...), '/')
}

func readyKey(tenant, topic string, due int64, seq uint64) []byte {
	k := topicPrefix(tenant, stateReady, topic)
	k = binary.BigEndian.AppendUint64(k, uint64(due)^(1<<63))
	return binary.BigEndian.AppendUint64(k, seq)
}

// leaseKey is the lease index's key of the deliveries entry at seq (a
// lease or a heartbeat) whose deadline its messages hold.
func leaseKey(tenant, topic string, deadline int64, seq uint64) []byte {
	k := topicPrefix(tenant, stateLease, topic)
	k = binary.BigEndian.AppendUint64(k, uint64(deadline)^(1<<63))
	return binary.BigEndian.AppendUint64(k, seq)
}

func orderingDigest(key string) [16]byte {
	sum := blake3.Sum256(append([]byte("ledger/outbox/ordering/v1\x00"), key...))
	var d [16]byte
	copy(d[:], sum[:])
	return d
}

func keyQueuePrefix(tenant, topic, orderingKey string) []byte {
	d := orderingDigest(orderingKey)
	return append(topicPrefix(tenant, stateKeyQ, topic), d[:]...)
}

func keyQueueKey(tenant, topic, orderingKey string, seq uint64) []byte {
	return binary.BigEndian.AppendUint64(keyQueuePrefix(tenant, topic, orderingKey), seq)
}

func deadKey(tenant, topic string, seq uint64) []byte {
	return binary.BigEndian.AppendUint64(topicPrefix(tenant, stateDead, topic), seq)
}

// prefixEnd is the smallest key above every key with the prefix (which ends
// in "/" or a digest byte below 0xff is not assumed: it carries).
func prefixEnd(prefix []byte) []byte {
	end := append([]byte(nil), prefix...)
	for i := len(end) - 1; i >= 0; i-- {
		if end[i] < 0xff {
			end[i]++
			return end[:i+1]
		}
	}
	return nil
}
