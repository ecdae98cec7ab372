package jetstream_test

import (
	"context"
	"fmt"
	"log"

	"github.com/crosstalk-go/crosstalk/gateway/ledger"
	"github.com/crosstalk-go/crosstalk/gateway/ledger/jetstream"
)

// Open a ledger shared by several relays on a 3-node cluster: every relay
// runs the same code against the same servers.
func ExampleOpen() {
	ctx := context.Background()
	store, err := jetstream.Open(ctx, "nats://n1:4222,nats://n2:4222,nats://n3:4222",
		&jetstream.Options{Replicas: 3})
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close()

	res, err := store.Append(ctx, []ledger.Record{{
		Kind: "chat.message", GroupID: "ops", By: "claude",
		Data:      []byte(`{"text":"deploy done"}`),
		DedupeKey: "01J9ZZZZZZZZZZZZZZZZZZZZZZ", // the envelope's message id
	}})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(res[0].Event.GroupID, res[0].Event.Seq, res[0].Duplicate)
}
