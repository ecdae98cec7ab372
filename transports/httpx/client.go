// Package httpx is the HTTP binding of the envelope protocol (spec
// "Transport Bindings: HTTP", docs/design.md §5.5) from the sending side: it POSTs
// envelopes as text/plain to a receiver's /crosstalk/receive URL and reads
// the receipt envelopes (or the ERROR envelope) back, retrying with backoff
// under the same Idempotency-Key.
//
// It does not serve: the relay's receiving endpoint is gateway/api.
package httpx

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	neturl "net/url"
	"strconv"
	"strings"
	"time"

	"github.com/crosstalk-go/crosstalk/envelope"
	"github.com/crosstalk-go/crosstalk/transports"
)

// Client posts envelopes. The zero value is usable: http.DefaultClient,
// no token, DefaultRetries.
type Client struct {
	// HTTP is the client used; http.DefaultClient when nil.
	HTTP *http.Client
	// Token, if set, is sent as "Authorization: Bearer <token>".
	Token string
	// Retries is how many times a failed POST is retried (network
	// errors, 429, 502, 503, 504); DefaultRetries when zero, none when
	// negative.
	Retries int
	// MinBackoff and MaxBackoff bound the exponential backoff between
	// tries: 1 s doubling to 16 s by default (docs/design.md §5.5). A 429's
	// Retry-After is honoured up to MaxBackoff.
	MinBackoff, MaxBackoff time.Duration
	// Logger receives a line per retry; nil discards.
	Logger *slog.Logger
}

// DefaultRetries is the default number of retries.
const DefaultRetries = 5

// maxResponse bounds a response body.
const maxResponse = 16 << 20

// Response is what the receiver answered.
type Response struct {
	// Status is the HTTP status code.
	Status int
	// Body is the response body (receipt envelopes, an ERROR envelope, or
	// JSON when asked for).
	Body []byte
	// Envelopes are the envelopes found in a text/plain body: one receipt
	// per envelope sent, ACK or ERROR.
	Envelopes []*envelope.Envelope
	// Attempts is how many POSTs were made.
	Attempts int

	location    string // of a redirect
	contentType string
}

// OK reports whether the receiver recorded every envelope: a 2xx answer
// whose body holds an envelope (a receipt per envelope sent, or an answer
// envelope). A 2xx without one — a captive portal's page, a web server at
// a wrong URL, a 204 — is not a crosstalk receiver's acknowledgement.
func (r *Response) OK() bool { return r.Status >= 200 && r.Status < 300 && len(r.Envelopes) > 0 }

// StatusError is a final answer that is not OK (Response.OK): an error
// status, a redirect, or a 2xx without any envelope. The Response is
// returned with it.
type StatusError struct {
	Status int
	Code   string // E-* code of the ERROR envelope, when there is one
	Reason string
	// Location is where a redirect (3xx) pointed; redirects are never
	// followed.
	Location string
	// ContentType is the answer's Content-Type, named for a 2xx answer
	// without any envelope.
	ContentType string
}

// Error returns the status and, when the answer was an ERROR envelope, its code and reason.
func (e *StatusError) Error() string {
	if e.Code != "" {
		return fmt.Sprintf("httpx: receiver answered %d %s: %s", e.Status, e.Code, e.Reason)
	}
	if e.Location != "" {
		return fmt.Sprintf("httpx: receiver answered %d, a redirect to %q: not followed; configure the URL of the receiving endpoint itself", e.Status, e.Location)
	}
	if e.Status >= 200 && e.Status < 300 {
		ct := e.ContentType
		if ct == "" {
			ct = "none"
		}
		return fmt.Sprintf("httpx: receiver answered %d with no envelope (Content-Type %s): not a crosstalk receiver's receipt, so not delivered (a captive portal, or a URL that is not a /crosstalk/receive endpoint?)", e.Status, ct)
	}
	return fmt.Sprintf("httpx: receiver answered %d", e.Status)
}

// IdempotencyKey returns the key Post sends when none is given: the
// SHA-256 of the text, so that retries and re-runs of the same text share
// it.
func IdempotencyKey(text []byte) string {
	sum := sha256.Sum256(text)
	return "sha256:" + hex.EncodeToString(sum[:16])
}

// MaxKey bounds an Idempotency-Key that HeaderKey passes as it is.
const MaxKey = 255

// HeaderKey returns key as an Idempotency-Key header value: key itself
// when it is at most MaxKey printable ASCII characters, else "sha256:"
// and the hex of its SHA-256 (the same for every retry). A crosstalk relay
// records the header with every event of the request, and records a key
// that is not so in this form too; HTTP clients refuse to send some bytes
// (control characters) at all.
func HeaderKey(key string) string {
	ok := len(key) <= MaxKey
	for i := 0; ok && i < len(key); i++ {
		ok = key[i] >= ' ' && key[i] <= '~'
	}
	if ok {
		return key
	}
	sum := sha256.Sum256([]byte(key))
	return "sha256:" + hex.EncodeToString(sum[:])
}

// Post sends text (one or more envelopes) to url. It retries transient
// failures with the same Idempotency-Key (key, or IdempotencyKey(text)
// when empty). It returns the last Response and, for an answer that is
// not OK (Response.OK), a *StatusError.
func (c *Client) Post(ctx context.Context, url string, text []byte, key string) (*Response, error) {
	if err := checkURL(url); err != nil {
		return nil, err // no retry can fix it
	}
	if key == "" {
		key = IdempotencyKey(text)
	}
	retries, minB, maxB := c.Retries, c.MinBackoff, c.MaxBackoff
	if retries == 0 {
		retries = DefaultRetries
	}
	if minB <= 0 {
		minB = time.Second
	}
	if maxB <= 0 {
		maxB = 16 * time.Second
	}
	hc := c.HTTP
	if hc == nil {
		hc = http.DefaultClient
	}
	// A redirect is never followed: Go's client turns a POST into a
	// bodiless GET on 301/302/303 (whose 200 would pass for a delivery)
	// and re-posts the envelope to any host a 307/308 names. It is a
	// final answer instead.
	noRedirect := *hc
	noRedirect.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	hc = &noRedirect
	backoff := minB
	for attempt := 1; ; attempt++ {
		resp, wait, err := c.try(ctx, hc, url, text, key)
		if resp != nil {
			resp.Attempts = attempt
		}
		retryable := err != nil && !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded) ||
			resp != nil && (resp.Status == 429 || resp.Status == 502 || resp.Status == 503 || resp.Status == 504)
		if !retryable || attempt > retries {
			if err != nil {
				return resp, fmt.Errorf("httpx: posting to %s (attempt %d): %w", url, attempt, err)
			}
			if !resp.OK() {
				return resp, statusError(resp)
			}
			return resp, nil
		}
		if wait <= 0 || wait > maxB {
			wait = backoff
		}
		if c.Logger != nil {
			c.Logger.Warn("retrying POST", "url", url, "attempt", attempt, "wait", wait, "err", err)
		}
		select {
		case <-ctx.Done():
			return resp, ctx.Err()
		case <-time.After(wait):
		}
		backoff = min(backoff*2, maxB)
	}
}

// ErrBadURL is returned by Post for a URL that is not http or https with
// a host ("127.0.0.1:7777", "localhost:7777"): it is not retried.
var ErrBadURL = errors.New("httpx: not an http or https URL")

func checkURL(s string) error {
	u, err := neturl.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("%w: %q", ErrBadURL, s)
	}
	return nil
}

func (c *Client) try(ctx context.Context, hc *http.Client, url string, text []byte, key string) (*Response, time.Duration, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(text))
	if err != nil {
		return nil, 0, err
	}
	req.Header.Set("Content-Type", "text/plain; charset=utf-8")
	req.Header.Set("Accept", "text/plain")
	req.Header.Set("Idempotency-Key", HeaderKey(key))
	if c.Token != "" {
		req.Header.Set("Authorization", "Bearer "+c.Token)
	}
	res, err := hc.Do(req)
	if err != nil {
		return nil, 0, err
	}
	defer res.Body.Close()
	body, err := io.ReadAll(io.LimitReader(res.Body, maxResponse))
	if err != nil {
		return nil, 0, err
	}
	out := &Response{Status: res.StatusCode, Body: body, location: res.Header.Get("Location"), contentType: res.Header.Get("Content-Type")}
	r := envelope.NewReader(bytes.NewReader(body))
	for {
		e, err := r.Next()
		if err != nil {
			break
		}
		out.Envelopes = append(out.Envelopes, e)
	}
	var wait time.Duration
	if s, err := strconv.Atoi(res.Header.Get("Retry-After")); err == nil && s > 0 {
		wait = time.Duration(s) * time.Second
	}
	return out, wait, nil
}

func statusError(r *Response) error {
	se := &StatusError{Status: r.Status}
	switch {
	case r.Status >= 300 && r.Status < 400:
		se.Location = r.location
	case r.Status >= 200 && r.Status < 300:
		se.ContentType = oneLine(r.contentType)
	}
	for _, e := range r.Envelopes {
		if e.Intent == envelope.IntentError {
			se.Code, _ = e.MetaValue("error", "Code")
			se.Reason, _ = e.MetaValue("error", "Reason")
			break
		}
	}
	return se
}

// Sender delivers envelopes by POST to the receiver's URL (its address in
// the relay's address book), with the message id as Idempotency-Key. It
// implements transports.Sender.
type Sender struct {
	Client *Client
}

// Send posts text to the URL to. It succeeds on a 2xx answer carrying an
// envelope (Response.OK); a 2xx without one is an error the dispatcher
// retries. A 4xx answer other than 408 and 429 is permanent
// (transports.ErrPermanent): the receiver refused the envelope; so is a
// redirect (3xx, never followed: the URL is wrong) and a URL that is not
// http or https.
func (s Sender) Send(ctx context.Context, to, id string, text []byte) error {
	c := s.Client
	if c == nil {
		c = &Client{}
	}
	key := id
	if key != "" {
		key = "msg:" + id
	}
	_, err := c.Post(ctx, to, text, key)
	var se *StatusError
	if errors.Is(err, ErrBadURL) || errors.As(err, &se) && se.Status >= 300 && se.Status < 500 && se.Status != 408 && se.Status != 429 {
		return fmt.Errorf("%w: %w", transports.ErrPermanent, err)
	}
	return err
}

var _ transports.Sender = Sender{}

// oneLine keeps the first 200 bytes of s with its control characters
// replaced, for an error message.
func oneLine(s string) string {
	if len(s) > 200 {
		s = s[:200]
	}
	return strings.Map(func(r rune) rune {
		if r < ' ' || r == 0x7f {
			return ' '
		}
		return r
	}, s)
}
