package api

// OutboxMessage is one message of the outbox (GET /v1/outbox/messages,
// /v1/outbox/dead; a business event's message).
type OutboxMessage struct {
	ID string `json:"id"`
	// Key is the idempotency key every delivery attempt carries.
	Key            string            `json:"key"`
	Topic          string            `json:"topic"`
	IdempotencyKey string            `json:"idempotency_key"`
	OrderingKey    string            `json:"ordering_key,omitempty"`
	Status         string            `json:"status"` // pending, leased, done or dead
	Attempts       int               `json:"attempts"`
	DueUnixNano    int64             `json:"due_unix_nano,string"`
	Worker         string            `json:"worker,omitempty"`
	Token          uint64            `json:"token,omitempty,string"`
	EnqueuedAt     int64             `json:"enqueued_unix_nano,string"`
	Seq            uint64            `json:"seq,string"`
	Headers        map[string]string `json:"headers,omitempty"`
	Payload        string            `json:"payload,omitempty"`
}

// OutboxMessageList is GET /v1/outbox/messages?topic=&status=&limit= and
// GET /v1/outbox/dead?topic=.
type OutboxMessageList struct {
	Messages []OutboxMessage `json:"messages"`
	// NextFrom is the from of the next page of dead letters (GET
	// /v1/outbox/dead), "" when there is no more.
	NextFrom string `json:"next_from,omitempty"`
}

// OutboxRequeueRequest is POST /v1/outbox/requeue: return dead messages to
// pending with fresh attempts. The operator recorded is the API key's id.
type OutboxRequeueRequest struct {
	IDs    []string `json:"ids"`
	Reason string   `json:"reason,omitempty"`
}

// OutboxRequeueResponse is the answer of a requeue.
type OutboxRequeueResponse struct {
	Requeued []string `json:"requeued"`
	Operator string   `json:"operator"`
}

// OutboxStats is GET /v1/outbox/stats?topic=.
type OutboxStats struct {
	Topics []OutboxTopic `json:"topics"`
}

// OutboxTopic counts one topic's messages.
type OutboxTopic struct {
	Topic         string             `json:"topic"`
	Enqueued      int64              `json:"enqueued,string"`
	Pending       int64              `json:"pending,string"`
	Waiting       int64              `json:"waiting,string"`
	Leased        int64              `json:"leased,string"`
	Done          int64              `json:"done,string"`
	Dead          int64              `json:"dead,string"`
	OldestPending int64              `json:"oldest_pending_unix_nano,omitempty,string"`
	Deliveries    uint64             `json:"deliveries_entries,string"`
	BlockedKeys   []OutboxBlockedKey `json:"blocked_keys"`
}

// OutboxBlockedKey is an ordering key held back by its oldest message.
type OutboxBlockedKey struct {
	OrderingKey string `json:"ordering_key"`
	Message     string `json:"message"`
	Status      string `json:"status"`
	Attempts    int    `json:"attempts"`
	Behind      int64  `json:"behind,string"`
}

// WebhookReceipt is the answer (200) of POST /v1/webhooks/{provider}.
type WebhookReceipt struct {
	// Status is received, or duplicate for an event recorded before (its
	// effects are not applied again).
	Status   string `json:"status"`
	Provider string `json:"provider"`
	EventID  string `json:"event_id"`
	Chain    string `json:"chain"`
	Seq      uint64 `json:"seq,string"`
}

// OutboxEvent is one step of a message's delivery history: a lease, a
// heartbeat, an outcome, a dead letter or a requeue.
type OutboxEvent struct {
	Seq          uint64 `json:"seq,string"`
	TimeUnixNano int64  `json:"time_unix_nano,string"`
	Type         string `json:"type"`
	Worker       string `json:"worker,omitempty"`
	Attempt      int    `json:"attempt,omitempty"`
	Token        uint64 `json:"token,omitempty,string"`
	Deadline     int64  `json:"deadline_unix_nano,omitempty,string"`
	Outcome      string `json:"outcome,omitempty"`
	NextAttempt  int64  `json:"next_attempt_unix_nano,omitempty,string"`
	DurationNano int64  `json:"duration_nano,omitempty,string"`
	DeadReason   string `json:"dead_reason,omitempty"`
	Detail       string `json:"detail,omitempty"`
}

// OutboxMessageHistory is GET /v1/outbox/messages/{id}: a message, its
// headers and payload, and its whole delivery history.
type OutboxMessageHistory struct {
	Message OutboxMessage `json:"message"`
	History []OutboxEvent `json:"history"`
}

// OutboxActivity is GET /v1/outbox/activity?topic=&minutes=: per topic,
// the outcomes of delivery attempts in equal buckets of the last minutes.
type OutboxActivity struct {
	Topics []OutboxTopicActivity `json:"topics"`
}

// OutboxTopicActivity is one topic's buckets, oldest first.
type OutboxTopicActivity struct {
	Topic         string         `json:"topic"`
	BucketSeconds int64          `json:"bucket_seconds,string"`
	Buckets       []OutboxBucket `json:"buckets"`
	// Truncated: the window held more entries than one answer reads; its
	// later buckets are undercounted.
	Truncated bool `json:"truncated,omitempty"`
}

// OutboxBucket counts the attempts that ended in one interval: delivered,
// failed (retried) and rejected (dead-lettered).
type OutboxBucket struct {
	StartUnixNano int64 `json:"start_unix_nano,string"`
	Delivered     int64 `json:"delivered,string"`
	Failed        int64 `json:"failed,string"`
	Rejected      int64 `json:"rejected,string"`
}
