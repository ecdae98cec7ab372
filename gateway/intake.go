package gateway

import (
	"bytes"
	"context"
	"errors"
	"fmt"

	"github.com/crosstalk-go/crosstalk/envelope"
	"github.com/crosstalk-go/crosstalk/transports"
)

// Handler returns the transports.Handler through which receivers (folder,
// clipboard, mail) hand text to the relay. It answers after the text's
// envelopes are durably recorded; its reply holds the ERROR envelopes of
// rejected ones, for media with a way back. Accepted envelopes get no
// receipt on these media — unlike HTTP, where the receipt is the response
// — so a mailbox is not answered with a mail per envelope. A text with
// more than Options.MaxEnvelopes envelopes is refused whole, nothing
// recorded, with an error wrapping both ErrTooManyEnvelopes and
// transports.ErrPermanent: offering it again cannot help.
func (r *Relay) Handler() transports.Handler {
	return func(ctx context.Context, in transports.Inbound) ([]byte, error) {
		outs, err := r.Ingest(ctx, Intake{Transport: in.Transport, Source: in.Source, Data: bytes.NewReader(in.Data)})
		if errors.Is(err, ErrTooManyEnvelopes) {
			return nil, fmt.Errorf("%w: %w", transports.ErrPermanent, err)
		}
		if err != nil {
			return nil, err
		}
		var buf bytes.Buffer
		w := envelope.NewWriter(&buf)
		for _, o := range outs {
			if o.Reject == nil {
				continue
			}
			if err := w.Write(r.Receipt(o)); err != nil {
				r.log.Warn("writing an error envelope", "err", err)
			}
		}
		return buf.Bytes(), nil
	}
}
