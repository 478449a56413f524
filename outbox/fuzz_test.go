package outbox

import (
	"bytes"
	"testing"
)

// Every payload decoder of the outbox accepts exactly the bytes its
// encoder produces: decoding never panics, and what decodes re-encodes to
// the same bytes, so one entry hash pins one meaning.

func FuzzDecodeMessage(f *testing.F) {
	f.Add((&messageEvent{OrderingKey: "cust-1", NotBefore: 5, Headers: []Header{{"A", "1"}, {"B", ""}}, Payload: []byte("{}")}).encode())
	f.Add((&messageEvent{}).encode())
	f.Add((&messageEvent{Payload: []byte("{}"), TraceParent: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}).encode())
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := decodeMessage(b)
		if err == nil && !bytes.Equal(m.encode(), b) {
			t.Fatalf("%x decoded to %+v, which encodes to %x", b, m, m.encode())
		}
	})
}

func FuzzDecodeDeliveryEvents(f *testing.F) {
	id := MessageID("acme", "email", "k")
	f.Add(uint8(0), (&leaseEvent{Worker: "w", Deadline: 9, Items: []leaseItem{{id, 1}}}).encode())
	f.Add(uint8(1), (&heartbeatEvent{Worker: "w", Deadline: 9, Items: []tokenItem{{id, 3}}}).encode())
	f.Add(uint8(2), (&outcomeEvent{Worker: "w", Items: []outcomeItem{{ID: id, Token: 3, Attempt: 1, Kind: Failed, NextAttempt: 7, Detail: "503"}}}).encode())
	f.Add(uint8(3), (&deadEvent{Items: []deadItem{{id, DeadAge, "old"}}}).encode())
	f.Add(uint8(4), (&requeueEvent{Operator: "ops", Reason: "fixed", Items: []ID{id}}).encode())
	f.Add(uint8(5), (&record{Topic: "email", Seq: 1, Status: Leased, Attempts: 2, Due: 3, Token: 4, Worker: "w", OrderingKey: "k", EnqueuedAt: 5, AgeFrom: 6}).encode())
	f.Fuzz(func(t *testing.T, kind uint8, b []byte) {
		var again []byte
		var err error
		switch kind % 6 {
		case 0:
			var v leaseEvent
			if v, err = decodeLease(b); err == nil {
				again = v.encode()
			}
		case 1:
			var v heartbeatEvent
			if v, err = decodeHeartbeat(b); err == nil {
				again = v.encode()
			}
		case 2:
			var v outcomeEvent
			if v, err = decodeOutcome(b); err == nil {
				again = v.encode()
			}
		case 3:
			var v deadEvent
			if v, err = decodeDead(b); err == nil {
				again = v.encode()
			}
		case 4:
			var v requeueEvent
			if v, err = decodeRequeue(b); err == nil {
				again = v.encode()
			}
		case 5:
			var v record
			if v, err = decodeRecord(b); err == nil {
				again = v.encode()
			}
		}
		if err == nil && !bytes.Equal(again, b) {
			t.Fatalf("kind %d: %x re-encodes to %x", kind%6, b, again)
		}
	})
}
