package client

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
)

// StreamError is an `event: error` the relay sent on a stream: it could not
// go on (its ledger failed, or it is shutting down). Its data is the
// relay's error {"code","message"}.
type StreamError struct {
	Code    string
	Message string
}

// Error returns "relay stream: CODE: message".
func (e *StreamError) Error() string { return "relay stream: " + e.Code + ": " + e.Message }

// ErrStreamEnded reports a stream the relay closed without an error event:
// it shut down or dropped the connection.
var ErrStreamEnded = errors.New("the relay ended the stream")

// Stream reads one Server-Sent Events stream at path and calls fn with the
// name and data of every event until fn fails, ctx ends (ctx.Err()), the
// relay sends `event: error` (*StreamError), or the stream ends
// (ErrStreamEnded, wrapped). A refusal is an error of Do's kinds.
func (c *Client) Stream(ctx context.Context, path, agent string, fn func(event string, data []byte) error) error {
	req, err := c.newRequest(ctx, http.MethodGet, path, agent, nil)
	if err != nil {
		return err
	}
	req.Header.Set("Accept", "text/event-stream")
	res, err := c.http().Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return fmt.Errorf("%w: %s: %w", ErrUnreachable, c.URL, err)
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(res.Body, 64<<10))
		return decode(res.StatusCode, b, nil)
	}
	sc := bufio.NewScanner(res.Body)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	var event string
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			event = ""
		case strings.HasPrefix(line, "event: "):
			event = line[len("event: "):]
		case strings.HasPrefix(line, "data: ") && event == "error":
			se := &StreamError{}
			if json.Unmarshal([]byte(line[len("data: "):]), se) != nil || se.Code == "" {
				se.Code, se.Message = "stream_error", line[len("data: "):]
			}
			return se
		case strings.HasPrefix(line, "data: "):
			if err := fn(event, []byte(line[len("data: "):])); err != nil {
				return err
			}
		}
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("%w: %w", ErrStreamEnded, err)
	}
	return ErrStreamEnded
}

// DefaultReconnect bounds Follow's reconnecting.
const DefaultReconnect = 30 * time.Second

// Follow reads the stream path() names, again and again: when the relay
// drops the connection, ends the stream or cannot be reached, it reconnects
// with backoff (path is asked again, so it can resume after the last event
// seen), for at most reconnect (DefaultReconnect when zero) since the
// stream last worked. It returns nil only when ctx ends; otherwise the
// error that ended it: fn's, a *StreamError, a refusal (*Error, …), or the
// last connection error once reconnecting gave up.
func (c *Client) Follow(ctx context.Context, path func() string, agent string, reconnect time.Duration, fn func(event string, data []byte) error) error {
	if reconnect <= 0 {
		reconnect = DefaultReconnect
	}
	var (
		since   time.Time // when the stream last worked
		attempt int
	)
	for {
		worked := false
		err := c.Stream(ctx, path(), agent, func(event string, data []byte) error {
			worked, attempt = true, 0
			return fn(event, data)
		})
		if ctx.Err() != nil {
			return nil
		}
		if !errors.Is(err, ErrUnreachable) && !errors.Is(err, ErrStreamEnded) && !isUnavailable(err) {
			return err
		}
		if worked || since.IsZero() {
			since = time.Now()
		}
		attempt++
		wait := Backoff(attempt, 200*time.Millisecond, 5*time.Second)
		if time.Since(since)+wait > reconnect {
			return fmt.Errorf("gave up reconnecting after %s: %w", reconnect, err)
		}
		c.log().Warn("relay stream lost; reconnecting", "path", path(), "attempt", attempt, "wait", wait, "err", err)
		select {
		case <-time.After(wait):
		case <-ctx.Done():
			return nil
		}
	}
}

// isUnavailable reports an answer worth retrying: 429 or 5xx.
func isUnavailable(err error) bool {
	var e *Error
	var se *StatusError
	switch {
	case errors.As(err, &e):
		return e.Status == http.StatusTooManyRequests || e.Status >= 500
	case errors.As(err, &se):
		return se.Status == http.StatusTooManyRequests || se.Status >= 500
	}
	return false
}
