package reserve_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/crosstalk-go/crosstalk/gateway/ledger/memory"
	"github.com/crosstalk-go/crosstalk/gateway/reserve"
)

func ExampleClassify() {
	for _, p := range [][2]string{
		{"src/*", "src/lib/parser.ts"},
		{"src/lib", "./src//lib/parser.ts"},
		{"src/lib/parser.ts", "src/lib/parser.ts"},
		{"src/lib", "src/components"},
	} {
		a, _ := reserve.Canonical(p[0])
		b, _ := reserve.Canonical(p[1])
		fmt.Println(a, "vs", b, "=>", reserve.Classify(a, b))
	}
	_, err := reserve.Canonical("src/../../etc")
	fmt.Println(errors.Is(err, reserve.ErrEscapesRoot))
	// Output:
	// src/* vs src/lib/parser.ts => partial
	// src/lib vs src/lib/parser.ts => partial
	// src/lib/parser.ts vs src/lib/parser.ts => exact
	// src/lib vs src/components => disjoint
	// true
}

func ExampleService_Reserve() {
	ctx := context.Background()
	store := memory.New(nil)
	defer store.Close()
	svc, err := reserve.NewService(ctx, store, reserve.Options{})
	if err != nil {
		panic(err)
	}
	rs, _ := svc.Reserve(ctx, reserve.Request{Agent: "claude", Scopes: []string{"src/auth/*"}, TTL: time.Hour, Reason: "auth rewrite"})
	fmt.Println("granted", rs[0].Agent, rs[0].Scope)

	_, err = svc.Reserve(ctx, reserve.Request{Agent: "codex", Scopes: []string{"src/auth/login.go"}})
	var ce *reserve.ConflictError
	if errors.As(err, &ce) {
		c := ce.Conflicts[0]
		fmt.Println("refused", c.Scope, "held by", c.Holder, "as", c.HeldScope, c.Class)
	}
	// Output:
	// granted claude src/auth/*
	// refused src/auth/login.go held by claude as src/auth/* partial
}
