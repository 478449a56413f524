package audit_test

import (
	"context"
	"errors"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/ledgerworks/ledger/audit"
	"github.com/ledgerworks/ledger/chain"
	"github.com/ledgerworks/ledger/checkpoint"
)

func TestPublisher(t *testing.T) {
	db, err := chain.Open(filepath.Join(t.TempDir(), "ledger.db"), chain.Options{Clock: clock()})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ctx := context.Background()
	var mu sync.Mutex
	var published []checkpoint.Checkpoint
	changed := make(chan struct{}, 16)
	p := &audit.Publisher{DB: db, SignerKey: testSigner, Interval: audit.IntervalMin,
		Publish: func(ctx context.Context, signed []byte, cp checkpoint.Checkpoint) error {
			if opened, err := checkpoint.Open(signed, testVerifier); err != nil || opened != cp {
				t.Errorf("published %+v: %v", opened, err)
			}
			mu.Lock()
			published = append(published, cp)
			mu.Unlock()
			changed <- struct{}{}
			return nil
		}}
	if err := p.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if err := p.Start(ctx); !errors.Is(err, audit.ErrPublisherStarted) {
		t.Fatalf("second Start: %v", err)
	}
	<-changed // the first, at Start: no chains
	if _, err := db.Append(ctx, chain.Request{Chain: "pub/a", Type: "t/v1"}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-changed:
	case <-time.After(10 * time.Second):
		t.Fatal("no checkpoint after an append")
	}
	time.Sleep(3 * audit.IntervalMin) // rounds without a change publish nothing
	if err := p.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(published) != 2 || published[0].Size != 0 || published[1].Size != 1 {
		t.Fatalf("published %+v", published)
	}
	if err := (&audit.Publisher{DB: db, SignerKey: testSigner, Interval: time.Millisecond, Publish: p.Publish}).Start(ctx); err == nil {
		t.Fatal("an interval below IntervalMin started")
	}
}
