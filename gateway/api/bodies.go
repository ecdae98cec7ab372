package api

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
)

// Bounds on the request bodies the relay holds at once, as multiples of
// the intake bound (max_body): what one caller (a principal, or an
// anonymous page caller's address) may have in flight, and the whole
// relay. Each request's own bound stays as it is; these bound how many
// the relay reads at once, so that callers who declare large bodies and
// send them slowly, each within its read timeout, cannot hold the relay's
// memory between them (docs/security.md "Limits").
const (
	bodiesPerCaller = 4
	bodiesTotal     = 32
)

// What a body read past the bounds on bodies in flight fails with (a body
// sent without a declared length, whose bytes are counted as they
// arrive): the caller's bound, or the relay's.
var (
	errCallerBodies = errors.New("too many request bodies in flight for this caller")
	errBodies       = errors.New("the relay holds too many request bodies at once; retry later")
)

// bodiesStatus returns the status that answers err, a read past a bound
// on bodies in flight (429 for the caller's, 503 for the relay's), or 0
// for any other error.
func bodiesStatus(err error) int {
	switch {
	case errors.Is(err, errCallerBodies):
		return http.StatusTooManyRequests
	case errors.Is(err, errBodies):
		return http.StatusServiceUnavailable
	}
	return 0
}

// bodyBudget counts the request body bytes the relay holds per caller and
// in total.
type bodyBudget struct {
	mu       sync.Mutex
	per      map[string]int64
	total    int64
	perMax   int64
	totalMax int64
}

// newBodyBudget returns the bounds for an intake bound of maxBody bytes.
// A caller's bound is at least twice the JSON bound, so that every route's
// own bound (the intake's, JSON's, a web form's) is met first and answered
// as its 413, whatever max_body is.
func newBodyBudget(maxBody int64) *bodyBudget {
	per := max(bodiesPerCaller*maxBody, 2*maxJSONBody)
	return &bodyBudget{per: map[string]int64{}, perMax: per, totalMax: bodiesTotal / bodiesPerCaller * per}
}

// take reserves n bytes for key. It reports false, taking nothing, with
// the status to answer (429 for the caller's bound, 503 for the relay's)
// and why.
func (b *bodyBudget) take(key string, n int64) (ok bool, status int, why string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	switch {
	case b.per[key]+n > b.perMax:
		return false, http.StatusTooManyRequests, fmt.Sprintf("too many request bodies in flight for %s (%d bytes at most at once)", key, b.perMax)
	case b.total+n > b.totalMax:
		return false, http.StatusServiceUnavailable, errBodies.Error()
	}
	b.per[key] += n
	b.total += n
	return true, 0, ""
}

// give returns n bytes of key's.
func (b *bodyBudget) give(key string, n int64) {
	if n == 0 {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.total -= n
	if b.per[key] -= n; b.per[key] <= 0 {
		delete(b.per, key)
	}
}

// admit counts r's body against key's bound and the relay's for as long
// as the request is served (call release when it is): a declared length
// at once, up to the caller's bound (a larger body is refused by its
// route), an undeclared one as its bytes arrive. It reports false with
// the status and reason to refuse the request with when a declared
// length does not fit.
func (b *bodyBudget) admit(r *http.Request, key string) (release func(), status int, why string) {
	switch {
	case r.Body == nil || r.Body == http.NoBody || r.ContentLength == 0:
		return func() {}, 0, ""
	case r.ContentLength > 0:
		n := min(r.ContentLength, b.perMax)
		if ok, status, why := b.take(key, n); !ok {
			return nil, status, why
		}
		return func() { b.give(key, n) }, 0, ""
	}
	cr := &countedBody{ReadCloser: r.Body, b: b, key: key}
	r.Body = cr
	return func() {
		cr.mu.Lock()
		n := cr.n
		cr.n, cr.done = 0, true
		cr.mu.Unlock()
		b.give(key, n)
	}, 0, ""
}

// countedBody counts the bytes of a body without a declared length
// against its caller's bound and the relay's as they are read.
type countedBody struct {
	io.ReadCloser
	b    *bodyBudget
	key  string
	mu   sync.Mutex
	n    int64 // bytes taken
	done bool  // released: the request is over
}

func (c *countedBody) Read(p []byte) (int, error) {
	n, err := c.ReadCloser.Read(p)
	if n > 0 {
		c.mu.Lock()
		defer c.mu.Unlock()
		if c.done {
			return n, err
		}
		if ok, status, _ := c.b.take(c.key, int64(n)); !ok {
			if status == http.StatusTooManyRequests {
				return 0, fmt.Errorf("%w (%d bytes at most at once)", errCallerBodies, c.b.perMax)
			}
			return 0, errBodies
		}
		c.n += int64(n)
	}
	return n, err
}
