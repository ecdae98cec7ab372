package bench

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"sync"
	"sync/atomic"
	"time"

	"github.com/crosstalk-go/crosstalk/internal/cputime"
	"github.com/crosstalk-go/crosstalk/signing"
)

// The ingest clients run, by default, in a process of their own (a load
// process), as real callers do: clients in the servers' process share
// their Go scheduler, and under load a goroutine waiting for the network
// there is noticed only when a P runs out of work or the runtime's
// monitor polls (every 10 ms at most), which adds that wait to both sides
// of every request. docs/performance.md ("Clients in their own process")
// measures the difference.
//
// The parent and the load process speak JSON lines over the child's
// stdin and stdout: one loadReq, one loadResp, in turn.

// loadReq is one command to the load process.
type loadReq struct {
	// Op is "init" (Key: the signing key, marshalled), "grow" (sign N
	// more distinct envelopes), "ensure" (sign enough that N distinct
	// envelopes are in stock, not yet handed out), "drive" (Clients clients POST to URL
	// for Slice; Fresh: distinct envelopes, else the reused stock) or
	// "streams" (open N delivery streams on the relay at URL, read until
	// the load process ends: openStreams).
	Op      string        `json:"op"`
	Key     []byte        `json:"key,omitempty"`
	N       int           `json:"n,omitempty"`
	URL     string        `json:"url,omitempty"`
	Clients int           `json:"clients,omitempty"`
	Slice   time.Duration `json:"slice,omitempty"`
	Fresh   bool          `json:"fresh,omitempty"`
}

// loadResp is the load process's answer: for "drive", what its meter
// counted and the CPU time the load process spent.
type loadResp struct {
	Err    string          `json:"err,omitempty"`
	Count  int64           `json:"count"`
	Done   int64           `json:"done"`
	Errors int64           `json:"errors"`
	Lats   []time.Duration `json:"lats,omitempty"`
	CPU    time.Duration   `json:"cpu"`
	// Streamed is the deliveries the streams have read so far.
	Streamed int64 `json:"streamed,omitempty"`
}

// ServeLoad is the load process: it answers the commands on r on w until
// r ends. cmd/crosstalk-bench runs it as `crosstalk-bench load-worker`.
func ServeLoad(ctx context.Context, r io.Reader, w io.Writer) error {
	dec := json.NewDecoder(bufio.NewReader(r))
	enc := json.NewEncoder(w)
	var (
		fromPool func() ([]byte, error)
		fresh    *source
		clients  = map[string]*http.Client{}
		streamed atomic.Int64
	)
	defer func() {
		for _, hc := range clients {
			hc.CloseIdleConnections()
		}
	}()
	for {
		var req loadReq
		if err := dec.Decode(&req); err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return fmt.Errorf("bench: load process: reading a command: %w", err)
		}
		var resp loadResp
		err := func() error {
			switch req.Op {
			case "init":
				key, err := signing.ParsePrivateKey(req.Key, benchKeyID)
				if err != nil {
					return err
				}
				fresh = &source{key: key, groups: allGroups}
				fromPool, err = reusedPool(key)
				return err
			case "grow":
				if fresh == nil {
					return errors.New("grow before init")
				}
				return fresh.grow(req.N)
			case "ensure":
				if fresh == nil {
					return errors.New("ensure before init")
				}
				_, err := fresh.ensure(req.N)
				return err
			case "drive":
				if fresh == nil {
					return errors.New("drive before init")
				}
				hc := clients[req.URL]
				if hc == nil {
					hc = newBenchClient(req.Clients)
					clients[req.URL] = hc
				}
				nextBody := fresh.next
				if !req.Fresh {
					nextBody = fromPool
				}
				m, phase := &meter{}, "ceiling"
				if req.Fresh {
					phase = "relay"
				}
				var err error
				labelled(ctx, phase, func(ctx context.Context) {
					err = drive(ctx, hc, req.URL, req.Clients, time.Now(), req.Slice, nextBody, m)
				})
				if err != nil {
					return err
				}
				resp = loadResp{Count: m.count, Done: m.done, Errors: m.errors, Lats: m.lats, CPU: m.cpu, Streamed: streamed.Load()}
				return nil
			case "streams":
				return openStreams(ctx, req.URL, req.N, &streamed)
			}
			return fmt.Errorf("unknown command %q", req.Op)
		}()
		if err != nil {
			resp = loadResp{Err: err.Error()}
		}
		if err := enc.Encode(&resp); err != nil {
			return fmt.Errorf("bench: load process: answering: %w", err)
		}
	}
}

// loadProc is the parent's end of a load process.
type loadProc struct {
	cmd *exec.Cmd
	in  io.WriteCloser
	enc *json.Encoder
	dec *json.Decoder
	mu  sync.Mutex
}

// startLoad starts the load process command (its arguments included)
// and hands it key.
func startLoad(ctx context.Context, command []string, key *signing.PrivateKey) (*loadProc, error) {
	if len(command) == 0 {
		return nil, errors.New("bench: no load process command")
	}
	cmd := exec.CommandContext(ctx, command[0], command[1:]...)
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("bench: starting the load process: %w", err)
	}
	p := &loadProc{cmd: cmd, in: in, enc: json.NewEncoder(in), dec: json.NewDecoder(bufio.NewReader(out))}
	data, err := signing.MarshalPrivateKey(key, time.Now())
	if err == nil {
		_, err = p.call(loadReq{Op: "init", Key: data})
	}
	if err != nil {
		p.close()
		return nil, err
	}
	return p, nil
}

// call sends req and returns the answer.
func (p *loadProc) call(req loadReq) (loadResp, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	var resp loadResp
	if err := p.enc.Encode(&req); err != nil {
		return resp, fmt.Errorf("bench: load process: %w", err)
	}
	if err := p.dec.Decode(&resp); err != nil {
		return resp, fmt.Errorf("bench: load process: reading its answer to %s: %w", req.Op, err)
	}
	if resp.Err != "" {
		return resp, fmt.Errorf("bench: load process: %s: %s", req.Op, resp.Err)
	}
	return resp, nil
}

// drive is drive's counterpart in the load process: the clients run
// there, and m gets what they counted, the CPU time of both processes
// and the machine's ticks during the slice.
func (p *loadProc) drive(url string, clients int, slice time.Duration, fresh bool, m *meter) error {
	cpu0 := cputime.Process()
	done := m.hostDuring()
	resp, err := p.call(loadReq{Op: "drive", URL: url, Clients: clients, Slice: slice, Fresh: fresh})
	done()
	if err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.count += resp.Count
	m.done += resp.Done
	m.errors += resp.Errors
	m.lats = append(m.lats, resp.Lats...)
	m.cpu += resp.CPU + cputime.Process() - cpu0
	m.measured += slice - slice/10
	m.streamed = resp.Streamed
	return nil
}

// close ends the load process.
func (p *loadProc) close() error {
	p.in.Close()
	return p.cmd.Wait()
}
