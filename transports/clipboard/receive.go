package clipboard

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/crosstalk-go/crosstalk/envelope"
	"github.com/crosstalk-go/crosstalk/transports"
)

// Receive polls the clipboard and hands new envelope text to h (see the
// package documentation). It returns nil when ctx ends, and an error
// wrapping ErrUnavailable when there is no clipboard — at the start, or
// later when the display goes away.
func (c *Clipboard) Receive(ctx context.Context, h transports.Handler) error {
	t, err := c.pick()
	if err != nil {
		return err
	}
	c.log.Info("clipboard: watching", "tool", t.name, "interval", c.interval)
	var (
		last      string // hash of the text at the last poll
		oversized bool   // the last poll found too much text
		failSum   string // the text the Handler last failed on
		failures  int
		retryAt   time.Time
	)
	wait := time.Duration(0)
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(wait):
		}
		wait = c.interval
		text, err := c.Read(ctx)
		switch {
		case ctx.Err() != nil:
			return nil
		case errors.Is(err, ErrTooLarge):
			if !oversized {
				c.log.Warn(err.Error())
			}
			// Reading the bound every poll is costly: slow down while
			// the oversized text stays.
			oversized, last = true, ""
			wait = min(4*c.interval, 5*time.Second)
			continue
		case errors.Is(err, ErrUnavailable):
			return err
		case err != nil:
			c.log.Warn("clipboard: read failed", "err", err)
			continue
		}
		if oversized {
			c.log.Info("clipboard: the clipboard is within the size bound again")
			oversized = false
		}
		sum := hashText(text)
		if sum == last {
			continue
		}
		last = sum
		kind, err := c.state.has(sum)
		if err != nil {
			c.log.Warn("clipboard: reading the state file", "err", err)
		}
		if kind != "" || !hasHeader(text) {
			continue
		}
		if sum == failSum && time.Now().Before(retryAt) {
			last = "" // look again at the next poll
			continue
		}
		reply, err := h(ctx, transports.Inbound{Transport: "clipboard", Source: "clipboard", Data: text})
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			if sum != failSum {
				failSum, failures = sum, 0
			}
			failures++
			d := backoff(c.interval, failures)
			retryAt, last = time.Now().Add(d), ""
			c.log.Warn("clipboard: handler failed; the text is offered again while it stays on the clipboard", "err", err, "retry_in", d)
			continue
		}
		failSum, failures = "", 0
		if err := c.state.add(kindSeen, sum); err != nil {
			c.log.Warn("clipboard: recording the text as seen", "err", err)
		}
		c.logReply(text, reply)
	}
}

// backoff is the wait before offering text again after the n-th failure:
// interval doubling up to maxBackoff.
func backoff(interval time.Duration, n int) time.Duration {
	d := interval
	for i := 0; i < n && d < maxBackoff; i++ {
		d *= 2
	}
	return min(d, maxBackoff)
}

// hasHeader reports whether text holds an envelope header: the Reader
// finds an envelope or a malformed one.
func hasHeader(text []byte) bool {
	_, err := envelope.NewReader(bytes.NewReader(text)).Next()
	if err == nil {
		return true
	}
	var se *envelope.SyntaxError
	return errors.As(err, &se)
}

// logReply logs what the Handler said about the text: the rejections in
// its reply (the clipboard has no way back), or that it was taken.
func (c *Clipboard) logReply(text, reply []byte) {
	n := 0
	rd := envelope.NewReader(bytes.NewReader(reply))
	for {
		env, err := rd.Next()
		if err == io.EOF || err != nil && !errors.As(err, new(*envelope.SyntaxError)) {
			break
		}
		if err != nil || env.Intent != envelope.IntentError {
			continue
		}
		n++
		code, _ := env.MetaValue("error", "Code")
		reason, _ := env.MetaValue("error", "Reason")
		c.log.Warn("clipboard: envelope rejected", "parent", env.Parent, "code", code, "reason", reason)
	}
	c.log.Info("clipboard: took envelope text", "bytes", len(text), "rejected", n)
}

// Send places text on the clipboard (fenced when Options.Fence is set),
// remembering it so that no Receive sharing the state ingests it. to and
// id are not used: the clipboard has one slot. A text larger than the
// bound is a permanent error (transports.ErrPermanent).
func (c *Clipboard) Send(ctx context.Context, to, id string, text []byte) error {
	if c.fence {
		text = Fence(text)
	}
	if len(text) > c.max {
		return fmt.Errorf("clipboard: send to %s: %w: %d bytes, more than %d", to, transports.ErrPermanent, len(text), c.max)
	}
	if err := c.Write(ctx, text); err != nil {
		return err
	}
	c.log.Info("clipboard: placed envelope on the clipboard", "to", to, "message", id, "fenced", c.fence)
	return nil
}

// Fence wraps text in a ``` fence longer than any backtick run in it, as
// envelope.Writer does with Fence set, without re-serializing the
// envelope (a signed one must stay byte for byte as it is).
func Fence(text []byte) []byte {
	run, longest := 0, 0
	for _, b := range text {
		if b == '`' {
			run++
			longest = max(longest, run)
		} else {
			run = 0
		}
	}
	fence := strings.Repeat("`", max(3, longest+1))
	var b bytes.Buffer
	b.WriteString(fence + "\n")
	b.Write(text)
	if len(text) > 0 && text[len(text)-1] != '\n' {
		b.WriteByte('\n')
	}
	b.WriteString(fence + "\n")
	return b.Bytes()
}
