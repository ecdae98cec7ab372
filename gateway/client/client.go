// Package client is the HTTP client of a relay's API (docs/api.md): JSON
// requests with retries where they are idempotent, the relay's error
// answers as typed errors carrying its error code, and Server-Sent Events
// streams followed across reconnects for a bounded time, and envelope
// text posted to the relay's own POST /crosstalk/receive (Receive). The
// crosstalk commands, c2a.Remote (and so crosstalk mcp and harness) use it.
//
// It is not the transport that forwards envelopes to other relays'
// POST /crosstalk/receive (transports/httpx), and it knows nothing of C2A:
// c2a.Remote maps its answers to deliveries and actions.
package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/crosstalk-go/crosstalk/transports/httpx"
)

// Client talks to one relay. The zero value is not usable: set URL.
type Client struct {
	// URL is the relay's base URL, e.g. "http://127.0.0.1:7777".
	URL string
	// Token is the bearer token, "" when the relay has none.
	Token string
	// HTTP is the HTTP client; http.DefaultClient when nil.
	HTTP *http.Client
	// Retries is how often a retryable request is retried; 3 when zero,
	// none when negative.
	Retries int
	// Logger receives retries and reconnects; nil discards them.
	Logger *slog.Logger
}

// Error is the relay's error answer {"error":{"code","message","line"}}:
// its HTTP status and error code (an envelope code such as E-PERM, or an
// API code such as permission_denied; docs/api.md).
type Error struct {
	Status  int
	Code    string
	Message string
	// Line is the input line of an envelope error, 0 when none.
	Line int
}

// Error returns "relay: CODE: message".
func (e *Error) Error() string { return "relay: " + e.Code + ": " + e.Message }

// StatusError is an answer other than 200 without a JSON error body.
type StatusError struct {
	Status int
	Body   string
}

// Error returns the status and the start of the body.
func (e *StatusError) Error() string {
	return fmt.Sprintf("relay answered %d: %s", e.Status, strings.TrimSpace(e.Body))
}

var (
	// ErrUnreachable wraps a request that got no answer: the relay is not
	// running, or not at URL.
	ErrUnreachable = errors.New("relay unreachable")
	// ErrNotServed reports a 404 or 405 without a JSON error: an endpoint
	// this relay does not mount.
	ErrNotServed = errors.New("the relay does not serve this endpoint")
)

// Request is one API request.
type Request struct {
	Method, Path string
	// Agent, when set, is sent as X-Crosstalk-Agent.
	Agent string
	// Body is sent with ContentType (application/json when empty).
	Body        []byte
	ContentType string
	// IdempotencyKey is sent as Idempotency-Key, in the form
	// httpx.HeaderKey gives it.
	IdempotencyKey string
	// Accept is the media type asked for; application/json when empty.
	Accept string
	// Retry allows retries on network errors, 429 and 5xx: set it for
	// reads and for requests the relay deduplicates.
	Retry bool
}

func (c *Client) http() *http.Client {
	if c.HTTP != nil {
		return c.HTTP
	}
	return http.DefaultClient
}

func (c *Client) log() *slog.Logger {
	if c.Logger != nil {
		return c.Logger
	}
	return slog.New(slog.DiscardHandler)
}

func (c *Client) url(path string) string { return strings.TrimRight(c.URL, "/") + path }

// Do sends rq and decodes a 200 JSON answer into out (nil: discarded).
// Errors: *Error for the relay's JSON error answers, ErrNotServed for a
// 404 or 405 without one, *StatusError for other answers, ErrUnreachable
// (wrapped) when there was none.
func (c *Client) Do(ctx context.Context, rq Request, out any) error {
	return c.retry(ctx, rq, func(status int, body []byte) error { return decode(status, body, out) })
}

// retry sends rq, hands each answer to check, and retries (when rq.Retry)
// while there is no answer or it is a 429 or 5xx that check refused.
func (c *Client) retry(ctx context.Context, rq Request, check func(status int, body []byte) error) error {
	retries := c.Retries
	if retries == 0 {
		retries = 3
	}
	if !rq.Retry || retries < 0 {
		retries = 0
	}
	for attempt := 1; ; attempt++ {
		status, body, err := c.once(ctx, rq)
		if err == nil {
			err = check(status, body)
		}
		retryable := status == 0 || status == http.StatusTooManyRequests || status >= 500
		if err == nil || !retryable || attempt > retries || ctx.Err() != nil {
			return err
		}
		wait := Backoff(attempt, 200*time.Millisecond, 5*time.Second)
		c.log().Warn("relay call failed; retrying", "path", rq.Path, "attempt", attempt, "wait", wait, "err", err)
		select {
		case <-time.After(wait):
		case <-ctx.Done():
			return fmt.Errorf("%s %s: %w", rq.Method, rq.Path, ctx.Err())
		}
	}
}

func (c *Client) newRequest(ctx context.Context, method, path, agent string, body io.Reader) (*http.Request, error) {
	req, err := http.NewRequestWithContext(ctx, method, c.url(path), body)
	if err != nil {
		return nil, err
	}
	if c.Token != "" {
		req.Header.Set("Authorization", "Bearer "+c.Token)
	}
	if agent != "" {
		req.Header.Set("X-Crosstalk-Agent", agent)
	}
	return req, nil
}

// once sends rq once: the status and body, or an error (status 0) when
// there was no answer.
func (c *Client) once(ctx context.Context, rq Request) (int, []byte, error) {
	var body io.Reader
	if rq.Body != nil {
		body = bytes.NewReader(rq.Body)
	}
	req, err := c.newRequest(ctx, rq.Method, rq.Path, rq.Agent, body)
	if err != nil {
		return 0, nil, err
	}
	accept := rq.Accept
	if accept == "" {
		accept = "application/json"
	}
	req.Header.Set("Accept", accept)
	if rq.Body != nil {
		ct := rq.ContentType
		if ct == "" {
			ct = "application/json"
		}
		req.Header.Set("Content-Type", ct)
	}
	if rq.IdempotencyKey != "" {
		req.Header.Set("Idempotency-Key", httpx.HeaderKey(rq.IdempotencyKey))
	}
	res, err := c.http().Do(req)
	if err != nil {
		return 0, nil, fmt.Errorf("%w: %s: %w", ErrUnreachable, c.URL, err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(io.LimitReader(res.Body, 64<<20))
	if err != nil {
		return 0, nil, fmt.Errorf("%w: reading the answer: %w", ErrUnreachable, err)
	}
	return res.StatusCode, b, nil
}

// decode turns an answer into out or the error it carries.
func decode(status int, body []byte, out any) error {
	if status == http.StatusOK {
		if out == nil {
			return nil
		}
		if err := json.Unmarshal(body, out); err != nil {
			return fmt.Errorf("bad answer from the relay: %w", err)
		}
		return nil
	}
	if e := parseError(status, body); e != nil {
		return e
	}
	if status == http.StatusNotFound || status == http.StatusMethodNotAllowed {
		return ErrNotServed
	}
	return &StatusError{Status: status, Body: string(body)}
}

// parseError reads {"error":{…}}; nil when body is not one.
func parseError(status int, body []byte) *Error {
	var ae struct {
		Error struct {
			Code    string `json:"code"`
			Message string `json:"message"`
			Line    int    `json:"line"`
		} `json:"error"`
	}
	if json.Unmarshal(body, &ae) != nil || ae.Error.Code == "" {
		return nil
	}
	return &Error{Status: status, Code: ae.Error.Code, Message: ae.Error.Message, Line: ae.Error.Line}
}

// Backoff is the wait before retry n (1, 2, …): base doubled each time,
// at most limit.
func Backoff(n int, base, limit time.Duration) time.Duration {
	d := base
	for i := 1; i < n && d < limit; i++ {
		d *= 2
	}
	return min(d, limit)
}
