package audit

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/ledgerworks/ledger/chain"
	"github.com/ledgerworks/ledger/checkpoint"
)

// IntervalMin bounds how often a Publisher signs.
const IntervalMin = 100 * time.Millisecond

// Publisher signs a checkpoint of a ledger every Interval and hands it to
// Publish, skipping a round when nothing changed since the last one. Its
// lifecycle is Start, then Stop.
type Publisher struct {
	DB        *chain.DB
	SignerKey string
	// Interval between checkpoints; at least IntervalMin.
	Interval time.Duration
	// Publish receives each new signed checkpoint (write it to a file,
	// serve it over HTTP). An error is logged; the next round tries again.
	Publish func(ctx context.Context, signed []byte, cp checkpoint.Checkpoint) error
	// Logger receives failures; slog.Default() when nil.
	Logger *slog.Logger

	mu      sync.Mutex
	cancel  context.CancelFunc
	done    chan struct{}
	last    checkpoint.Checkpoint
	started bool
}

// ErrPublisherStarted: Start of a Publisher that runs.
var ErrPublisherStarted = errors.New("audit: publisher already started")

// Start publishes a first checkpoint now and then one every Interval
// until Stop or until ctx ends. The first checkpoint's error is returned.
func (p *Publisher) Start(ctx context.Context) error {
	if p.Interval < IntervalMin {
		return fmt.Errorf("audit: publisher interval %v below %v", p.Interval, IntervalMin)
	}
	if p.DB == nil || p.Publish == nil {
		return errors.New("audit: publisher without DB or Publish")
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.started {
		return ErrPublisherStarted
	}
	if err := p.round(ctx); err != nil {
		return err
	}
	ctx, p.cancel = context.WithCancel(ctx)
	p.done = make(chan struct{})
	p.started = true
	go p.run(ctx)
	return nil
}

func (p *Publisher) run(ctx context.Context) {
	defer close(p.done)
	ticker := time.NewTicker(p.Interval)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
			if err := p.round(ctx); err != nil && ctx.Err() == nil {
				p.logger().Error("checkpoint not published", "err", err)
			}
		}
	}
}

// round signs and publishes one checkpoint, unless it is the last one's.
func (p *Publisher) round(ctx context.Context) error {
	signed, cp, err := CreateCheckpoint(ctx, p.DB, p.SignerKey)
	if err != nil {
		return err
	}
	if cp == p.last {
		return nil
	}
	if err := p.Publish(ctx, signed, cp); err != nil {
		return err
	}
	p.last = cp
	return nil
}

// Stop ends the rounds and waits for the one running, or for ctx.
func (p *Publisher) Stop(ctx context.Context) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.started {
		return nil
	}
	p.cancel()
	select {
	case <-p.done:
	case <-ctx.Done():
		return ctx.Err()
	}
	p.started = false
	return nil
}

func (p *Publisher) logger() *slog.Logger {
	if p.Logger != nil {
		return p.Logger
	}
	return slog.Default()
}
