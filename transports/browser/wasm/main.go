//go:build js && wasm

// Command wasm is the browser extension's parser and verifier, compiled
// with GOOS=js GOARCH=wasm by transports/browser.Build. It sets
// globalThis.crosstalk to an object of synchronous functions that take and
// return strings (JSON where structured), then blocks forever so that they
// stay callable:
//
//	crosstalk.parse(text, strict)  → the JSON Lines of `crosstalk parse --json`
//	crosstalk.check(text, known)   → JSON browser.CheckResult, or {"error": "…"}
//	crosstalk.fence(text)          → text in a ``` fence
//	crosstalk.keys(known)          → JSON {"keys": [browser.Key]}, or {"error": "…"}
//	crosstalk.forget(known, sender) → JSON {"known", "forgotten"}: browser.Forget
//
// where text is a string, or a Uint8Array of UTF-8 bytes.
//
// It does no I/O: the service worker (ext/sw.js) passes the page text in
// and keeps the trust store text in the browser's storage.
package main

import (
	"context"
	"encoding/json"
	"syscall/js"

	"github.com/crosstalk-go/crosstalk/transports/browser"
)

func main() {
	api := js.Global().Get("Object").New()
	api.Set("parse", js.FuncOf(func(this js.Value, args []js.Value) any {
		if len(args) < 1 {
			return ""
		}
		strict := len(args) > 1 && args[1].Truthy()
		out, err := browser.ParseJSON(text(args[0]), strict)
		if err != nil {
			return errorJSON(err)
		}
		return string(out)
	}))
	api.Set("check", js.FuncOf(func(this js.Value, args []js.Value) any {
		if len(args) < 1 {
			return errorJSON(errNoText)
		}
		known := ""
		if len(args) > 1 && args[1].Type() == js.TypeString {
			known = args[1].String()
		}
		res, err := browser.Check(context.Background(), text(args[0]), known)
		if err != nil {
			return errorJSON(err)
		}
		b, err := json.Marshal(res)
		if err != nil {
			return errorJSON(err)
		}
		return string(b)
	}))
	api.Set("fence", js.FuncOf(func(this js.Value, args []js.Value) any {
		if len(args) < 1 {
			return ""
		}
		return browser.Fence(args[0].String())
	}))
	api.Set("keys", js.FuncOf(func(this js.Value, args []js.Value) any {
		if len(args) < 1 || args[0].Type() != js.TypeString {
			return errorJSON(errNoText)
		}
		keys, err := browser.Keys(args[0].String())
		if err != nil {
			return errorJSON(err)
		}
		b, err := json.Marshal(map[string]any{"keys": keys})
		if err != nil {
			return errorJSON(err)
		}
		return string(b)
	}))
	api.Set("forget", js.FuncOf(func(this js.Value, args []js.Value) any {
		if len(args) < 2 || args[0].Type() != js.TypeString || args[1].Type() != js.TypeString {
			return errorJSON(errNoText)
		}
		known, n, err := browser.Forget(args[0].String(), args[1].String())
		if err != nil {
			return errorJSON(err)
		}
		b, err := json.Marshal(map[string]any{"known": known, "forgotten": n})
		if err != nil {
			return errorJSON(err)
		}
		return string(b)
	}))
	js.Global().Set("crosstalk", api)
	select {}
}

// text returns a string argument, or the bytes of a Uint8Array as they
// are: a JavaScript string cannot hold invalid UTF-8, bytes can (the tests
// pass fixture files that way).
func text(v js.Value) string {
	if v.InstanceOf(js.Global().Get("Uint8Array")) {
		b := make([]byte, v.Get("length").Int())
		js.CopyBytesToGo(b, v)
		return string(b)
	}
	return v.String()
}

type textError string

func (e textError) Error() string { return string(e) }

const errNoText = textError("no text given")

func errorJSON(err error) string {
	b, _ := json.Marshal(map[string]string{"error": err.Error()})
	return string(b)
}
