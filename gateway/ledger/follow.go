package ledger

import (
	"context"
	"iter"
)

// Pages is the follow loop a Store builds Follow and FollowLog on: it
// yields what read returns after the position after, page by page (pos
// gives an item's position), and once caught up waits before reading
// again. arm is called before every read, so that an append between the
// read and the wait is not missed; the function it returns blocks until
// something may have been appended (nil), or returns the error that ends
// the sequence: ctx.Err() ends it silently, any other error (the store
// closing) is yielded last. A read error is yielded last unless ctx ended.
func Pages[T any](ctx context.Context, after int64, page int, read func(after int64) ([]T, error), pos func(T) int64, arm func() (wait func() error, err error)) iter.Seq2[T, error] {
	return func(yield func(T, error) bool) {
		var zero T
		for {
			wait, err := arm()
			if err == nil {
				var items []T
				if items, err = read(after); err == nil {
					for _, it := range items {
						if !yield(it, nil) {
							return
						}
						after = pos(it)
					}
					if len(items) == page {
						continue
					}
					err = wait()
				}
			}
			if err != nil {
				if ctx.Err() == nil {
					yield(zero, err)
				}
				return
			}
		}
	}
}
