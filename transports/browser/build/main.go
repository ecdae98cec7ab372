// Command build writes the crosstalk browser extension, unpacked, into a
// directory: go run ./transports/browser/build DIR (from inside this
// module). Load DIR in Chromium (chrome://extensions → Developer mode →
// Load unpacked) or Firefox (about:debugging → Load Temporary Add-on →
// DIR/manifest.json); README.md, "Browser extension", says more.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"

	"github.com/crosstalk-go/crosstalk/transports/browser"
)

func main() {
	if len(os.Args) != 2 || os.Args[1] == "-h" || os.Args[1] == "--help" {
		fmt.Fprintln(os.Stderr, "usage: go run ./transports/browser/build DIR")
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := browser.Build(ctx, os.Args[1], nil); err != nil {
		fmt.Fprintln(os.Stderr, "build:", err)
		os.Exit(1)
	}
	fmt.Println("wrote the unpacked extension to", os.Args[1])
}
