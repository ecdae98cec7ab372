package mail_test

import (
	"context"
	"log"
	"log/slog"
	"os"
	"os/signal"

	"github.com/crosstalk-go/crosstalk/transports"
	"github.com/crosstalk-go/crosstalk/transports/mail"
)

// A relay's mail transport: envelopes are read from a dedicated mailbox
// and answered through the same account's submission server.
func ExampleNewReceiver() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	opts := &mail.Options{
		From:      "Crosstalk Relay <relay@example.org>",
		StateFile: "/var/lib/crosstalk/mail-state.json",
		Logger:    slog.Default(),
	}
	snd, err := mail.NewSender(mail.Server{Addr: "smtp.example.org:587", Username: "relay", Password: os.Getenv("MAIL_PASSWORD")}, opts)
	if err != nil {
		log.Fatal(err)
	}
	rcv, err := mail.NewReceiver(mail.Server{Addr: "imap.example.org:143", Username: "relay", Password: os.Getenv("MAIL_PASSWORD")}, snd, opts)
	if err != nil {
		log.Fatal(err)
	}
	err = rcv.Receive(ctx, func(ctx context.Context, in transports.Inbound) ([]byte, error) {
		// Record in.Data durably (the relay's Ingest), then return the
		// receipt or ERROR envelopes; they are mailed back when in.CanReply.
		return nil, nil
	})
	if err != nil {
		log.Fatal(err)
	}
}

// Sending one envelope to a mail address.
func ExampleSender_Send() {
	snd, err := mail.NewSender(mail.Server{Addr: "smtp.example.org:587", Username: "relay", Password: os.Getenv("MAIL_PASSWORD")},
		&mail.Options{From: "relay@example.org"})
	if err != nil {
		log.Fatal(err)
	}
	text := []byte("[[CLAUDE→email:kalle@example.org v1]]\nmessage: 01J9Z8Y7X6W5V4T3S2R1Q0PA01\ncontext: naming\nintent: REQUEST\n\nbody: |\n  Which name do you prefer?\nsig: none\n[[END]]\n")
	if err := snd.Send(context.Background(), "email:kalle@example.org", "01J9Z8Y7X6W5V4T3S2R1Q0PA01", text); err != nil {
		log.Fatal(err)
	}
}
