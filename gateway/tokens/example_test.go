package tokens_test

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/crosstalk-go/crosstalk/gateway/tokens"
)

// Mint a token, look it up as the relay does on each request, revoke it.
func Example() {
	dir, _ := os.MkdirTemp("", "tokens-example")
	defer os.RemoveAll(dir)
	store := tokens.Open(filepath.Join(dir, tokens.FileName))

	secret, tok, err := store.New("user")
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(store.Lookup(secret))
	if _, err := store.Revoke(tok.ID); err != nil {
		fmt.Println(err)
	}
	fmt.Println(store.Lookup(secret))
	// Output:
	// user true
	//  false
}
