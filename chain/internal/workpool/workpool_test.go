package workpool

import (
	"errors"
	"testing"
)

type item struct{ in, out int }

type scratch struct{ calls int }

func square(s *scratch, items []item) {
	s.calls++
	for i := range items {
		items[i].out = items[i].in * items[i].in
	}
}

// TestDeliversInOrder: every item comes back once, in the order it was
// added, with its work done, for streams shorter than a batch, of whole
// batches, and longer than the queue.
func TestDeliversInOrder(t *testing.T) {
	for _, n := range []int{0, 1, 2, 3, 7, 64, 1000} {
		for _, opts := range []Options{{}, {Workers: 1, BatchSize: 1, BatchesPerWorker: 1}, {Workers: 3, BatchSize: 4, BatchesPerWorker: 2}} {
			next := 0
			p := New(opts, square, func(items []item) error {
				for _, it := range items {
					if it.in != next || it.out != next*next {
						t.Fatalf("n %d, %+v: delivered %+v, want in %d out %d", n, opts, it, next, next*next)
					}
					next++
				}
				return nil
			})
			for i := range n {
				if err := p.Add(item{in: i}); err != nil {
					t.Fatal(err)
				}
			}
			if err := p.Finish(); err != nil {
				t.Fatal(err)
			}
			p.Close()
			if next != n {
				t.Fatalf("n %d, %+v: %d items delivered", n, opts, next)
			}
		}
	}
}

// TestDeliverErrorStops: the first error deliver returns comes back from
// the Add or Finish that delivered, and nothing after it is delivered.
func TestDeliverErrorStops(t *testing.T) {
	stop := errors.New("stop")
	delivered := 0
	p := New(Options{Workers: 2, BatchSize: 2, BatchesPerWorker: 1}, square, func(items []item) error {
		delivered += len(items)
		if delivered >= 4 {
			return stop
		}
		return nil
	})
	defer p.Close()
	var err error
	for i := 0; i < 100 && err == nil; i++ {
		err = p.Add(item{in: i})
	}
	if !errors.Is(err, stop) {
		t.Fatalf("Add returned %v, want the deliver error", err)
	}
	if delivered != 4 {
		t.Fatalf("%d items delivered, want 4", delivered)
	}
}

// TestCallerDoesTheTail: a stream shorter than a batch is never handed
// off: the calling goroutine does its work, with its own scratch.
func TestCallerDoesTheTail(t *testing.T) {
	p := New(Options{Workers: 1, BatchSize: 8}, square, func([]item) error { return nil })
	defer p.Close()
	for i := range 5 {
		if err := p.Add(item{in: i}); err != nil {
			t.Fatal(err)
		}
	}
	if err := p.Finish(); err != nil {
		t.Fatal(err)
	}
	if p.scratch.calls != 1 {
		t.Fatalf("the caller's scratch did %d batches, want the tail", p.scratch.calls)
	}
}
