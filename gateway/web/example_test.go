package web_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"time"

	"github.com/crosstalk-go/crosstalk/gateway"
	"github.com/crosstalk-go/crosstalk/gateway/api"
	"github.com/crosstalk-go/crosstalk/gateway/ledger/memory"
	"github.com/crosstalk-go/crosstalk/gateway/web"
	"github.com/crosstalk-go/crosstalk/signing"
)

// The relay's listener serves the API and the pages from one handler: the
// pages are mounted on the API, behind its gate.
func ExampleNew() {
	store := memory.New(nil)
	defer store.Close()
	relay := gateway.New(store, nil)
	a := api.New(relay, nil) // tokens, hosts, rate limit: as for the API alone
	defer a.Close()          // ends the API's and the pages' streams
	site, err := web.New(relay, a, &web.Options{
		Trust: signing.NewTrustStore(filepath.Join(os.TempDir(), "known_keys")), // the relay's trust file
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	srv := &http.Server{Handler: site, ReadHeaderTimeout: 10 * time.Second}
	_ = srv // srv.Serve(ln) on the relay's listener

	// What a browser gets at the relay's URL.
	rec := httptest.NewRecorder()
	site.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "http://127.0.0.1:7777/", nil))
	fmt.Println(rec.Code, rec.Header().Get("Content-Type"))
	// Output: 200 text/html; charset=utf-8
}
