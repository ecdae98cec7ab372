package client

import (
	"bytes"
	"context"
	"errors"
	"github.com/crosstalk-go/crosstalk/transports/httpx"
	"net/http"

	"github.com/crosstalk-go/crosstalk/envelope"
)

// Receipts is the relay's answer to POST /crosstalk/receive
// (docs/design.md §5.5): one receipt envelope per envelope sent, an ACK
// or an ERROR.
type Receipts struct {
	// Status is the HTTP status: 200 when every envelope was recorded.
	Status int
	// Body is the answer as the relay sent it: the receipt envelopes as text.
	Body []byte
	// Envelopes are the envelopes parsed from Body.
	Envelopes []*envelope.Envelope
}

// Receive posts text (one or more envelopes) to the relay's
// POST /crosstalk/receive and returns its receipts. The relay records an
// envelope once by message id, so network errors, 429 and 5xx are
// retried (Retries) under one Idempotency-Key, the SHA-256 of text.
//
// An answer other than 200 comes with its Receipts and an error: *Error
// with the code and reason of the first ERROR envelope, or *StatusError
// when there is none. No answer is ErrUnreachable (wrapped), and the end
// of ctx while waiting to retry is ctx's error; both with nil Receipts.
func (c *Client) Receive(ctx context.Context, text []byte) (*Receipts, error) {
	rq := Request{
		Method: http.MethodPost, Path: "/crosstalk/receive", Body: text,
		ContentType: "text/plain; charset=utf-8", Accept: "text/plain",
		IdempotencyKey: httpx.IdempotencyKey(text), Retry: true,
	}
	var rc *Receipts
	err := c.retry(ctx, rq, func(status int, body []byte) error {
		rc = &Receipts{Status: status, Body: body}
		r := envelope.NewReader(bytes.NewReader(body))
		for {
			e, err := r.Next()
			if err != nil {
				break
			}
			rc.Envelopes = append(rc.Envelopes, e)
		}
		if status == http.StatusOK {
			return nil
		}
		for _, e := range rc.Envelopes {
			if e.Intent == envelope.IntentError {
				code, _ := e.MetaValue("error", "Code")
				reason, _ := e.MetaValue("error", "Reason")
				return &Error{Status: status, Code: code, Message: reason}
			}
		}
		return &StatusError{Status: status, Body: string(body)}
	})
	var ce *Error
	var se *StatusError
	if err != nil && !errors.As(err, &ce) && !errors.As(err, &se) {
		return nil, err // no answer, or ctx ended while waiting to retry
	}
	return rc, err
}
