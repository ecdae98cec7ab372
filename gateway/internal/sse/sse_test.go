package sse

import (
	"bufio"
	"context"
	"fmt"
	"iter"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// TestPumpFlushes checks when Pump's events reach the client: an event
// whose successor is not yet at hand is flushed at once (here the
// sequence waits for the client to have read each event before yielding
// the next, so an event held back would stall the test), and a burst
// that is at hand arrives whole, in order, with the stream's end.
func TestPumpFlushes(t *testing.T) {
	const n = 5
	read := make(chan string, 3*n)
	var burst bool
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		out, ok := Start(w)
		if !ok {
			return
		}
		var seq iter.Seq2[int, error] = func(yield func(int, error) bool) {
			for i := range n {
				if !yield(i, nil) {
					return
				}
				if burst {
					continue
				}
				select { // the client must see event i before i+1 exists
				case got := <-read:
					if want := fmt.Sprint("data: ", i); got != want {
						t.Errorf("client read %q, want %q", got, want)
					}
				case <-time.After(10 * time.Second):
					t.Errorf("event %d was not flushed to the client", i)
					return
				}
			}
		}
		Pump(r.Context(), out, time.Hour, seq, func(i int) error { return out.Event(fmt.Sprint(i), "n", []byte(fmt.Sprint(i))) },
			func(err error) { t.Errorf("fail(%v)", err) }, nil)
	}))
	defer srv.Close()
	for _, b := range []bool{false, true} {
		burst = b
		res, err := http.Get(srv.URL)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		sc := bufio.NewScanner(res.Body)
		for sc.Scan() {
			if line := sc.Text(); strings.HasPrefix(line, "data: ") {
				got = append(got, line)
				if !burst {
					read <- line
				}
			}
		}
		res.Body.Close()
		if want := "data: 0,data: 1,data: 2,data: 3,data: 4"; strings.Join(got, ",") != want {
			t.Errorf("burst %v: events %q, want %q", burst, got, want)
		}
	}
}

// TestPumpError checks that an error from the sequence is written with
// fail and reaches the client although Pump holds its flushes.
func TestPumpError(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		out, _ := Start(w)
		var seq iter.Seq2[int, error] = func(yield func(int, error) bool) {
			if yield(1, nil) {
				yield(0, fmt.Errorf("the ledger went away"))
			}
		}
		Pump(r.Context(), out, time.Hour, seq, func(i int) error { return out.Event("", "n", []byte(fmt.Sprint(i))) },
			func(err error) { out.JSON("", "error", map[string]string{"message": err.Error()}) }, nil)
		<-r.Context().Done() // the handler stays: only Pump's flush sends the error
	}))
	defer srv.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL, nil)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	sc := bufio.NewScanner(res.Body)
	for sc.Scan() {
		if strings.Contains(sc.Text(), "the ledger went away") {
			return
		}
	}
	t.Errorf("the error event never arrived: %v", sc.Err())
}
