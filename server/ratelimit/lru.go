package ratelimit

import (
	"container/list"
	"sync"

	"golang.org/x/time/rate"
)

// lru holds at most max limiters, by name; the least recently used one
// makes room for a new one. A limiter dropped and met again starts with a
// full bucket.
type lru struct {
	mu    sync.Mutex
	max   int
	limit rate.Limit
	burst int
	order *list.List // of *tracked, most recently used first
	index map[string]*list.Element
}

type tracked struct {
	name    string
	limiter *rate.Limiter
}

func newLRU(max int, limit rate.Limit, burst int) *lru {
	return &lru{max: max, limit: limit, burst: burst, order: list.New(), index: map[string]*list.Element{}}
}

// get returns the limiter of name, creating it (and dropping the least
// recently used one when full).
func (c *lru) get(name string) *rate.Limiter {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.index[name]; ok {
		c.order.MoveToFront(e)
		return e.Value.(*tracked).limiter
	}
	if c.order.Len() >= c.max {
		oldest := c.order.Back()
		c.order.Remove(oldest)
		delete(c.index, oldest.Value.(*tracked).name)
	}
	t := &tracked{name: name, limiter: rate.NewLimiter(c.limit, c.burst)}
	c.index[name] = c.order.PushFront(t)
	return t.limiter
}

func (c *lru) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.order.Len()
}
