// Package dnstest runs a real DNS server on loopback UDP and TCP for tests
// of the DNS key lookup (docs/signing.md §6): it answers TXT queries from a
// table, with the TTLs, rcodes and delays a test sets, and records the
// queries it saw. Negative answers carry an SOA record whose minimum is the
// negative TTL (RFC 2308). It is not a resolver and follows no delegation.
package dnstest

import (
	"context"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/net/dns/dnsmessage"
)

// Server is a DNS server on 127.0.0.1. Change its records with Set while
// it runs.
type Server struct {
	pc net.PacketConn
	ln net.Listener

	mu      sync.Mutex
	txt     map[string][][]string // lower-case FQDN → records, each its strings
	rcode   map[string]dnsmessage.RCode
	ttl     uint32
	negTTL  uint32
	hang    bool
	queries []string
}

// Start starts a server answering TXT queries from txt (lower-case FQDN →
// records, each a list of character-strings) and stops it when t ends.
// Names not in txt are NXDOMAIN.
func Start(t testing.TB, txt map[string][][]string) *Server {
	t.Helper()
	pc, ln, err := listen()
	if err != nil {
		t.Fatal(err)
	}
	s := &Server{pc: pc, ln: ln, txt: map[string][][]string{}, rcode: map[string]dnsmessage.RCode{}, ttl: 300, negTTL: 60}
	for k, v := range txt {
		s.txt[strings.ToLower(k)] = v
	}
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		buf := make([]byte, 1500)
		for {
			n, addr, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			if resp := s.answer(buf[:n]); resp != nil {
				pc.WriteTo(resp, addr)
			}
		}
	}()
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go s.serveTCP(c)
		}
	}()
	t.Cleanup(func() { pc.Close(); ln.Close(); wg.Wait() })
	return s
}

// listen opens a UDP and a TCP socket on one free loopback port. The UDP
// port the system picks may be taken for TCP: then it tries another.
func listen() (net.PacketConn, net.Listener, error) {
	var lastErr error
	for range 20 {
		pc, err := net.ListenPacket("udp", "127.0.0.1:0")
		if err != nil {
			return nil, nil, err
		}
		ln, err := net.Listen("tcp", pc.LocalAddr().String())
		if err == nil {
			return pc, ln, nil
		}
		pc.Close()
		lastErr = err
	}
	return nil, nil, fmt.Errorf("dnstest: no loopback port free for both UDP and TCP: %w", lastErr)
}

func (s *Server) serveTCP(c net.Conn) {
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	var l [2]byte
	if _, err := readFull(c, l[:]); err != nil {
		return
	}
	req := make([]byte, int(l[0])<<8|int(l[1]))
	if _, err := readFull(c, req); err != nil {
		return
	}
	if resp := s.answer(req); resp != nil {
		c.Write(append([]byte{byte(len(resp) >> 8), byte(len(resp))}, resp...))
	}
}

func readFull(c net.Conn, b []byte) (int, error) {
	n := 0
	for n < len(b) {
		m, err := c.Read(b[n:])
		n += m
		if err != nil {
			return n, err
		}
	}
	return n, nil
}

// Addr returns the server's "host:port" (UDP and TCP).
func (s *Server) Addr() string { return s.pc.LocalAddr().String() }

// Resolver returns a net.Resolver that asks only this server.
func (s *Server) Resolver() *net.Resolver {
	return &net.Resolver{
		PreferGo: true,
		Dial: func(ctx context.Context, network, address string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, network, s.Addr())
		},
	}
}

// Set replaces the records of name (nil removes them: NXDOMAIN).
func (s *Server) Set(name string, records [][]string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if records == nil {
		delete(s.txt, strings.ToLower(name))
		return
	}
	s.txt[strings.ToLower(name)] = records
}

// SetRCode makes the server answer name with rcode (e.g. SERVFAIL).
func (s *Server) SetRCode(name string, rcode dnsmessage.RCode) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.rcode[strings.ToLower(name)] = rcode
}

// SetTTL sets the TTL of answers and the negative TTL (SOA minimum) of
// NXDOMAIN and empty answers, in seconds.
func (s *Server) SetTTL(ttl, negative uint32) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ttl, s.negTTL = ttl, negative
}

// Hang makes the server read queries and never answer, like a dead or
// filtered server.
func (s *Server) Hang(hang bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.hang = hang
}

// Queries returns the queries seen so far, as "TypeTXT name.".
func (s *Server) Queries() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.queries...)
}

func (s *Server) answer(req []byte) []byte {
	var p dnsmessage.Parser
	h, err := p.Start(req)
	if err != nil {
		return nil
	}
	q, err := p.Question()
	if err != nil {
		return nil
	}
	name := strings.ToLower(q.Name.String())
	s.mu.Lock()
	s.queries = append(s.queries, q.Type.String()+" "+name)
	recs, ok := s.txt[name]
	rcode, ttl, negTTL, hang := s.rcode[name], s.ttl, s.negTTL, s.hang
	s.mu.Unlock()
	if hang {
		return nil
	}
	rh := dnsmessage.Header{ID: h.ID, Response: true, Authoritative: true, RecursionDesired: h.RecursionDesired, RecursionAvailable: true}
	switch {
	case rcode != 0:
		rh.RCode = rcode
	case !ok:
		rh.RCode = dnsmessage.RCodeNameError
	}
	b := dnsmessage.NewBuilder(nil, rh)
	b.EnableCompression()
	b.StartQuestions()
	b.Question(q)
	b.StartAnswers()
	answered := false
	if rh.RCode == dnsmessage.RCodeSuccess && q.Type == dnsmessage.TypeTXT {
		for _, txt := range recs {
			b.TXTResource(dnsmessage.ResourceHeader{Name: q.Name, Type: dnsmessage.TypeTXT, Class: dnsmessage.ClassINET, TTL: ttl}, dnsmessage.TXTResource{TXT: txt})
			answered = true
		}
	}
	if !answered && (rh.RCode == dnsmessage.RCodeSuccess || rh.RCode == dnsmessage.RCodeNameError) {
		b.StartAuthorities()
		zone := dnsmessage.MustNewName("test.")
		b.SOAResource(dnsmessage.ResourceHeader{Name: zone, Type: dnsmessage.TypeSOA, Class: dnsmessage.ClassINET, TTL: negTTL},
			dnsmessage.SOAResource{NS: dnsmessage.MustNewName("ns.test."), MBox: dnsmessage.MustNewName("hostmaster.test."), Serial: 1, Refresh: 3600, Retry: 600, Expire: 86400, MinTTL: negTTL})
	}
	out, err := b.Finish()
	if err != nil {
		return nil
	}
	return out
}
