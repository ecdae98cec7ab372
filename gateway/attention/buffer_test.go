package attention

import (
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"
)

// frag is a fragment for agent claude from will in thread T1 of g1, at t0+at.
func frag(id string, at time.Duration) Fragment {
	return Fragment{Agent: "claude", Group: "g1", Thread: "T1", Author: "will", EventID: id, Seq: int64(at / time.Millisecond), At: t0.Add(at)}
}

func (f Fragment) with(fn func(*Fragment)) Fragment { fn(&f); return f }

// ids renders batches as "[a b] [c]" for compact comparisons.
func ids(bs []Batch) string {
	var parts []string
	for _, b := range bs {
		s := "[" + strings.Join(b.EventIDs, " ")
		if len(b.Superseded) > 0 {
			s += " -" + strings.Join(b.Superseded, " -")
		}
		parts = append(parts, s+"]")
	}
	return strings.Join(parts, " ")
}

func restIDs(fs []Fragment) string {
	var s []string
	for _, f := range fs {
		s = append(s, f.EventID)
	}
	return strings.Join(s, " ")
}

// TestMerge covers docs/design.md §5.4 "Buffered: merge same-author, same-thread
// fragments (quiet 3 s, at most 30 s)" and C2A "buffered".
func TestMerge(t *testing.T) {
	sec := time.Second
	// typing every 2 s from 0 to 34 s
	var typing []Fragment
	for at := time.Duration(0); at <= 34*sec; at += 2 * sec {
		typing = append(typing, frag(fmt.Sprintf("f%02d", at/sec), at))
	}
	tests := []struct {
		name      string
		pending   []Fragment
		now       time.Duration
		wantReady string
		wantRest  string
		wantWake  time.Duration // -1: zero time
	}{
		{"empty", nil, 0, "", "", -1},
		{"one, still quiet period", []Fragment{frag("a", 0)}, 3*sec - time.Nanosecond, "", "a", 3 * sec},
		{"one, quiet period over exactly", []Fragment{frag("a", 0)}, 3 * sec, "[a]", "", -1},
		{"pieces merged", []Fragment{frag("a", 0), frag("b", sec), frag("c", 2*sec)}, 5 * sec, "[a b c]", "", -1},
		{"pieces waiting for last+3s", []Fragment{frag("a", 0), frag("b", sec), frag("c", 2*sec)}, 4900 * time.Millisecond, "", "a b c", 5 * sec},
		{"gap just under quiet joins", []Fragment{frag("a", 0), frag("b", 3*sec-time.Millisecond)}, 10 * sec, "[a b]", "", -1},
		{"gap of exactly quiet splits", []Fragment{frag("a", 0), frag("b", 3*sec)}, 10 * sec, "[a] [b]", "", -1},
		{"split, second still open", []Fragment{frag("a", 0), frag("b", 4*sec)}, 5 * sec, "[a]", "b", 7 * sec},
		{"max window reached while typing", typing[:15], 30 * sec,
			"[f00 f02 f04 f06 f08 f10 f12 f14 f16 f18 f20 f22 f24 f26 f28]", "", -1},
		{"max window not yet reached", typing[:15], 30*sec - time.Nanosecond, "", restIDs(typing[:15]), 30 * sec},
		{"max window splits late merge", typing, 35 * sec,
			"[f00 f02 f04 f06 f08 f10 f12 f14 f16 f18 f20 f22 f24 f26 f28]", "f30 f32 f34", 37 * sec},
		{"fragment just inside the window", []Fragment{frag("a", 0), frag("b", 2*sec), frag("c", 4*sec),
			frag("d", 6*sec), frag("e", 8*sec), frag("f", 10*sec), frag("g", 12*sec), frag("h", 14*sec),
			frag("i", 16*sec), frag("j", 18*sec), frag("k", 20*sec), frag("l", 22*sec), frag("m", 24*sec),
			frag("n", 26*sec), frag("o", 28*sec), frag("p", 30*sec-time.Nanosecond)}, 40 * sec,
			"[a b c d e f g h i j k l m n o p]", "", -1},
		{"different authors not merged", []Fragment{frag("a", 0), frag("b", sec).with(func(f *Fragment) { f.Author = "ana" })}, 5 * sec,
			"[a] [b]", "", -1},
		{"different threads not merged", []Fragment{frag("a", 0), frag("b", sec).with(func(f *Fragment) { f.Thread = "T2" })}, 5 * sec,
			"[a] [b]", "", -1},
		{"different groups not merged", []Fragment{frag("a", 0), frag("b", sec).with(func(f *Fragment) { f.Group = "g2" })}, 5 * sec,
			"[a] [b]", "", -1},
		{"different agents not merged", []Fragment{frag("a", 0), frag("b", sec).with(func(f *Fragment) { f.Agent = "codex" })}, 5 * sec,
			"[a] [b]", "", -1},
		{"other author keeps own quiet period", []Fragment{frag("a", 0), frag("b", 2*sec).with(func(f *Fragment) { f.Author = "ana" })}, 3 * sec,
			"[a]", "b", 5 * sec},
		{"interleaved authors", []Fragment{frag("a1", 0), frag("b1", sec).with(func(f *Fragment) { f.Author = "ana" }),
			frag("a2", 2*sec), frag("b2", 3*sec).with(func(f *Fragment) { f.Author = "ana" })}, 10 * sec,
			"[a1 a2] [b1 b2]", "", -1},
		{"out of order input sorted", []Fragment{frag("c", 2*sec), frag("a", 0), frag("b", sec)}, 5 * sec, "[a b c]", "", -1},
		{"rest keeps input order", []Fragment{frag("c", 2*sec), frag("x", sec).with(func(f *Fragment) { f.Author = "ana" }), frag("a", 0)}, sec,
			"", "c x a", 4 * sec},
		{"immediate flushes what came before", []Fragment{frag("a", 0), frag("b", sec).with(func(f *Fragment) { f.Immediate = true })}, sec,
			"[a b]", "", -1},
		{"immediate does not flush other threads", []Fragment{frag("a", 0).with(func(f *Fragment) { f.Thread = "T2" }),
			frag("b", sec).with(func(f *Fragment) { f.Immediate = true })}, sec, "[b]", "a", 3 * sec},
		{"edit before injection supersedes", []Fragment{frag("a", 0), frag("a2", sec).with(func(f *Fragment) { f.Supersedes = "a" })}, 4 * sec,
			"[a2 -a]", "", -1},
		{"edit of an earlier batch stays", []Fragment{frag("a2", 0).with(func(f *Fragment) { f.Supersedes = "a" })}, 4 * sec,
			"[a2]", "", -1},
		{"same seq and time tie keeps input order", []Fragment{frag("x", 0), frag("y", 0)}, 3 * sec, "[x y]", "", -1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ready, rest, wake := Merge(tt.pending, t0.Add(tt.now))
			wantWake := time.Time{}
			if tt.wantWake >= 0 {
				wantWake = t0.Add(tt.wantWake)
			}
			if ids(ready) != tt.wantReady || restIDs(rest) != tt.wantRest || !wake.Equal(wantWake) {
				t.Errorf("Merge(%s, now+%v) = %s, rest %q, wake %v, want %s, rest %q, wake %v",
					restIDs(tt.pending), tt.now, ids(ready), restIDs(rest), wake, tt.wantReady, tt.wantRest, wantWake)
			}
		})
	}
}

func TestMergeBatchFields(t *testing.T) {
	pending := []Fragment{frag("b", 2*time.Second), frag("a", 0)}
	ready, _, _ := Merge(pending, t0.Add(10*time.Second))
	want := []Batch{{
		Agent: "claude", Group: "g1", Thread: "T1", Author: "will", EventIDs: []string{"a", "b"},
		FirstSeq: 0, LastSeq: 2000, First: t0, Last: t0.Add(2 * time.Second),
	}}
	if !reflect.DeepEqual(ready, want) {
		t.Errorf("Merge() = %+v, want %+v", ready, want)
	}
	if pending[0].EventID != "b" {
		t.Errorf("Merge() reordered its input: %s", restIDs(pending))
	}
}

func TestBufferCustomWindows(t *testing.T) {
	b := Buffer{Quiet: 5 * time.Second, MaxWindow: 8 * time.Second}
	pending := []Fragment{frag("a", 0), frag("b", 4*time.Second), frag("c", 8*time.Second)}
	ready, rest, wake := b.Merge(pending, t0.Add(9*time.Second))
	if ids(ready) != "[a b]" || restIDs(rest) != "c" || !wake.Equal(t0.Add(13*time.Second)) {
		t.Errorf("Buffer{5s, 8s}.Merge(a@0 b@4 c@8, now+9s) = %s, rest %q, wake %v, want [a b], rest c, wake +13s",
			ids(ready), restIDs(rest), wake.Sub(t0))
	}
}
