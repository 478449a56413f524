// Package outbox is a transactional outbox on the chain engine: side
// effects (an email, a payment capture, a webhook) are enqueued in the
// same transaction as the business entries that cause them, and delivered
// by workers with a key the receiver dedupes on. Its delivery history is
// itself hash-chained.
//
// # Basics
//
// EnqueueTx records a message in the caller's chain.Tx, beside the entries
// of any domain package's …Tx operation, so the message exists exactly when
// the business event does:
//
//	err := db.Update(ctx, func(tx *chain.Tx) error {
//		if _, err := book.PostTx(tx, posting); err != nil {
//			return err
//		}
//		_, err := outbox.EnqueueTx(tx, outbox.EnqueueRequest{
//			Tenant: "acme", Topic: "invoice-email", IdempotencyKey: "inv-2026-0042:email",
//			Headers: []outbox.Header{{Name: "To", Value: "billing@customer.example"}},
//			Payload: invoiceJSON,
//		})
//		return err
//	})
//
// The idempotency key is required: a retried business operation enqueues
// once (a replay), and the same key with another message is a
// *chain.ConflictError. The message id follows from tenant, topic and key
// (MessageID), and every attempt carries the key "outbox:<id>" (ID.Key).
//
// A Worker delivers a tenant's topics: a Handler per topic gets each
// message with its lease and returns nil (delivered), a transient error
// (retried after exponential backoff with jitter, Policy) or an error
// wrapped with Permanent (dead-lettered). A message past its topic's
// MaxAttempts or MaxAge is dead too; ListDead lists the dead and Requeue
// returns them to pending, recorded with the operator's name and reason.
// Webhook is a built-in Handler that POSTs with Standard Webhooks
// signatures. Start(ctx) and Stop(ctx) run and stop a worker.
//
// Each topic has two chains: tenant/outbox/<topic>/messages holds the
// enqueues (TypeMessage), tenant/outbox/<topic>/deliveries the history:
// leases (TypeLease: which messages, which worker, until when, which
// attempt), heartbeats, outcomes (what each attempt returned, its
// duration and the receiver's answer), dead letters and requeues. History
// answers "when was this invoice email first tried, by which worker, and
// what did the gateway answer", and `ledgerctl verify` proves that nobody
// rewrote it. The delivery state (each message's status, the ready index
// of pending messages ordered by due time, each key carrying a copy of its
// message's record for the claims, the lease index of the lease
// entries whose deadline messages still hold, the ordering keys' queues,
// the dead letters) is
// derived state in the state keyspace, written in the same transactions;
// Check rebuilds it from the chains and Rebuild rewrites it.
//
// # Leases, fencing and ordering
//
// ClaimTx leases due messages in a batch, recorded as one lease entry
// whose seq on the deliveries chain is the leases' fencing token. RecordTx
// and HeartbeatTx accept an outcome or a heartbeat only for the message's
// current token: a worker whose lease expired and was taken over gets
// ErrLeaseLost and records nothing, so a slow worker can never overwrite a
// newer attempt. An expired lease makes the message due again; its next
// claim counts as a new attempt. Messages with the same OrderingKey are
// delivered one at a time in enqueue order: only the oldest undelivered
// one is ever due, so a failing or dead message holds back its key alone
// (TopicStats.BlockedKeys lists such keys).
//
// Claims read the ready index from its start (past a floor no ready key
// lies below) and the lease index from its start, never from a cursor, so a message whose transaction
// commits late is found however the commits interleave.
//
// # Tracing
//
// EnqueueTx under a recording span (the ledger's, see chain.Options) is a
// span, "outbox.enqueue <topic>", and the message keeps its traceparent
// (Message.TraceParent, the optional last field of the message encoding:
// untraced messages encode as before, and a retry from another trace is a
// replay). With WorkerOptions.TracerProvider each attempt is the root
// span of a trace of its own, "outbox.deliver <topic>", linked to the
// enqueue's span, with the attempt number and outcome; the webhook
// deliverer sends its traceparent and records the answer's status. See
// docs/OUTBOX.md, Tracing.
//
// # Caveats
//
// Delivery is at least once: a worker that crashes after its handler
// succeeded, before the outcome was recorded, leaves the lease to expire
// and the message is attempted again with the same key. Effects are exactly
// once only where the receiver dedupes on that key (Idempotency-Key,
// webhook-id); the inbox package does so for webhooks into a ledger.
//
// A handler must finish within its lease or be extended by heartbeats,
// which the Worker sends every third of the lease; when a heartbeat finds
// the lease lost, the handler's context is canceled. A topic's Timeout
// must fit the lease (LeaseFor), so a lease never expires while its
// handler may still run.
//
// The webhook deliverer never follows a redirect (a 3xx is a permanent
// failure), uses no proxy from the environment, and connects only to
// public addresses (CheckAddress) unless WebhookOptions allows private
// ones: the address is checked when the socket connects, after name
// resolution, so a DNS answer cannot lead it to loopback or a metadata
// endpoint.
//
// On the embedded backend one process owns the ledger file, so its workers
// are goroutines of that process; on PostgreSQL workers in several
// processes share topics. Workers wake on the commits that make a message
// due (chain.Tx.Notify; NOTIFY/LISTEN on PostgreSQL) and poll every
// PollInterval as well, so a lost notification delays a message, never
// loses it. Enqueues of one topic serialize on its messages chain; an
// enqueue with an ordering key also locks the topic's deliveries chain.
//
// Every limit (topic, key and header sizes, payload, batch sizes, lease
// bounds) is an exported constant checked on entry; a request beyond one
// is refused with an *Error and nothing is written. See docs/OUTBOX.md.
package outbox
