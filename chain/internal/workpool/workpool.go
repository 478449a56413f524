// Package workpool runs work over a stream of items in a pool of workers
// and hands the items on in the order they came: the caller reads items
// one by one (Add), they travel to the workers in batches through a
// bounded queue, so memory stays constant however long the stream, and
// each batch is delivered, in order, once its work is done.
//
// The goroutine that needs a batch next does the batch's work itself when
// no worker has begun it, and while a worker does the oldest batch it
// does the ones no worker has begun: a busy machine that does not schedule
// the workers is no slower than one goroutine.
//
// The chain package's verify hashes stored entries through it: an entry's
// hash does not depend on the entries before it, so only the cheap checks
// after it need seq order.
package workpool

import (
	"runtime"
	"sync"
	"sync/atomic"
)

// Options configures a Pool; the zero value is usable.
type Options struct {
	// Workers is the size of the pool; zero means runtime.GOMAXPROCS(0).
	Workers int
	// BatchSize is how many items one hand-off holds; zero means 256.
	BatchSize int
	// BatchesPerWorker bounds the batches in flight per worker; zero
	// means 4.
	BatchesPerWorker int
}

// A Pool carries items of type T; S is the scratch memory of one
// goroutine doing work (each worker and the caller have their own).
type Pool[T, S any] struct {
	work    func(scratch *S, items []T)
	deliver func(items []T) error
	opts    Options

	queue   chan batchRef[T] // to the workers; nil until the first hand-off
	wg      sync.WaitGroup
	sent    []*batch[T] // handed off, in order
	free    []*batch[T]
	current *batch[T]
	scratch S
}

// batch is a batch of items on its way through the pool. state is
// generation<<1 | claimed: a batch is reused, and a worker holding an old
// generation's reference cannot claim it.
type batch[T any] struct {
	items      []T
	done       chan struct{}
	generation uint64
	state      atomic.Uint64
}

type batchRef[T any] struct {
	batch      *batch[T]
	generation uint64
}

// New returns a pool that applies work to each batch and then
// delivers it, in order, on the goroutine that calls Add and Finish. work
// must not keep items; deliver's error stops the pool and is returned
// by the Add or Finish that delivered. Close must be called once the
// pool is no longer used.
func New[T, S any](opts Options, work func(scratch *S, items []T), deliver func(items []T) error) *Pool[T, S] {
	if opts.Workers <= 0 {
		opts.Workers = max(runtime.GOMAXPROCS(0), 1)
	}
	if opts.BatchSize <= 0 {
		opts.BatchSize = 256
	}
	if opts.BatchesPerWorker <= 0 {
		opts.BatchesPerWorker = 4
	}
	p := &Pool[T, S]{work: work, deliver: deliver, opts: opts}
	p.current = p.newBatch()
	return p
}

func (p *Pool[T, S]) newBatch() *batch[T] {
	return &batch[T]{items: make([]T, 0, p.opts.BatchSize)}
}

// claim reports whether the caller may do the batch's work.
func (b *batch[T]) claim(generation uint64) bool {
	return b.state.CompareAndSwap(generation<<1, generation<<1|1)
}

// run does a claimed batch's work and marks it done.
func (p *Pool[T, S]) run(b *batch[T], scratch *S) {
	p.work(scratch, b.items)
	close(b.done)
}

// Add appends an item; a full batch is handed to the workers, and once as
// many batches as the queue holds are in flight the oldest is delivered.
func (p *Pool[T, S]) Add(item T) error {
	p.current.items = append(p.current.items, item)
	if len(p.current.items) < p.opts.BatchSize {
		return nil
	}
	return p.send()
}

func (p *Pool[T, S]) send() error {
	if p.queue == nil {
		queue := make(chan batchRef[T], p.opts.Workers*p.opts.BatchesPerWorker)
		p.queue = queue
		for range p.opts.Workers {
			p.wg.Add(1)
			go func() {
				defer p.wg.Done()
				var scratch S
				for ref := range queue {
					if ref.batch.claim(ref.generation) {
						p.run(ref.batch, &scratch)
					}
				}
			}()
		}
	}
	b := p.current
	b.done = make(chan struct{})
	b.state.Store(b.generation << 1)
	p.queue <- batchRef[T]{batch: b, generation: b.generation}
	p.sent = append(p.sent, b)
	if len(p.free) > 0 {
		p.current, p.free = p.free[len(p.free)-1], p.free[:len(p.free)-1]
	} else {
		p.current = p.newBatch()
	}
	if len(p.sent) >= p.opts.Workers*p.opts.BatchesPerWorker {
		return p.oldest()
	}
	return nil
}

// oldest waits for the oldest batch in flight, doing the work of those no
// worker has begun meanwhile, and delivers it.
func (p *Pool[T, S]) oldest() error {
	b := p.sent[0]
	if b.claim(b.generation) {
		p.run(b, &p.scratch)
	}
	for _, other := range p.sent[1:] {
		select {
		case <-b.done:
		default:
			if other.claim(other.generation) {
				p.run(other, &p.scratch)
			}
			continue
		}
		break
	}
	<-b.done
	p.sent = p.sent[1:]
	err := p.deliver(b.items)
	b.items = b.items[:0]
	b.generation++
	p.free = append(p.free, b)
	return err
}

// Finish delivers every batch in flight, then does the work of the last,
// short batch on the calling goroutine (no hand-off is worth it) and
// delivers it.
func (p *Pool[T, S]) Finish() error {
	for len(p.sent) > 0 {
		if err := p.oldest(); err != nil {
			return err
		}
	}
	p.work(&p.scratch, p.current.items)
	return p.deliver(p.current.items)
}

// Close stops the workers and waits for them: the work of a batch may read
// what the caller must keep valid (a read transaction's pages) until Close
// returns.
func (p *Pool[T, S]) Close() {
	if p.queue != nil {
		close(p.queue)
		p.queue = nil
	}
	p.wg.Wait()
}
