package idempotency

import (
	"container/list"
	"context"
	"sync"
)

// Cache holds finished records in front of the store. The guard adds a
// record only after its request hash matched a retry's, reads it before
// the store, and swallows (logs and counts) every error.
type Cache interface {
	// Get returns the cached record of scope; found is false when absent.
	Get(ctx context.Context, scope Scope) (rec Record, found bool, err error)
	// Add caches a finished record.
	Add(ctx context.Context, rec Record) error
}

// LRU is an in-process Cache of at most Size records, dropping the least
// recently used. It never fails.
type LRU struct {
	size  int
	mu    sync.Mutex
	order *list.List // of *Record, most recent first
	items map[Scope]*list.Element
}

// NewLRU returns an LRU holding at most size records (at least 1).
func NewLRU(size int) *LRU {
	return &LRU{size: max(size, 1), order: list.New(), items: map[Scope]*list.Element{}}
}

// Get implements Cache.
func (c *LRU) Get(_ context.Context, scope Scope) (Record, bool, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	el, ok := c.items[scope]
	if !ok {
		return Record{}, false, nil
	}
	c.order.MoveToFront(el)
	return el.Value.(*Record).clone(), true, nil
}

// shared returns the cached record of scope without copying it: the
// guard only reads it, and Add replaces a record rather than changing it.
func (c *LRU) shared(scope Scope) (*Record, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	el, ok := c.items[scope]
	if !ok {
		return nil, false
	}
	c.order.MoveToFront(el)
	return el.Value.(*Record), true
}

// Add implements Cache.
func (c *LRU) Add(_ context.Context, rec Record) error {
	if !rec.Finished() {
		return nil
	}
	rec = rec.clone()
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.items[rec.Scope]; ok {
		el.Value = &rec
		c.order.MoveToFront(el)
		return nil
	}
	c.items[rec.Scope] = c.order.PushFront(&rec)
	for c.order.Len() > c.size {
		last := c.order.Back()
		c.order.Remove(last)
		delete(c.items, last.Value.(*Record).Scope)
	}
	return nil
}

// Len returns how many records the cache holds.
func (c *LRU) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.order.Len()
}
