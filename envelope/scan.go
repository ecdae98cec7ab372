package envelope

import (
	"bytes"
	"io"
	"strings"
	"sync"
)

// lineScanner splits input into lines at LF, CRLF or a lone CR (docs/design.md §3.1:
// chat UIs and clipboards on other systems produce all three). It never holds
// more than maxLine bytes of one line: the rest of a longer line is read and
// thrown away, and the line is reported as too long. Memory is therefore
// bounded by the line limit, not by the input.
type lineScanner struct {
	r       io.Reader
	inMem   interface{ Len() int } // r, when it reads from memory and says how much is left
	buf     []byte
	start   int // first unread byte in buf
	end     int // end of valid data in buf
	maxLine int
	line    int  // number of the line last returned
	skipLF  bool // the last line ended in CR: a following LF belongs to it
	eof     bool
	err     error   // first read error other than io.EOF
	pooled  *[]byte // what getBuf gave, when buf came from bufPools (put back as it is: no allocation)
	direct  bool    // buf is the caller's input (NewBytesReader): nothing to read or copy

	// The first CR at or after start, when cr >= start; cr < 0 means
	// there is none in buf[start:crTo]. Most input has no CR at all, so
	// looking for one once per buffer, not once per line, saves a search
	// per line.
	cr, crTo int
}

// initialBuffer is the scanner's first buffer size; it grows (doubling)
// only for longer lines, up to maxLine+1, so parsing one small envelope
// does not pay for a 64 KiB buffer.
const initialBuffer = 4 << 10

// bufPools recycle line buffers between Readers (an HTTP handler makes one
// Reader per request), by size: 4 KiB (the initial buffer) doubling up to
// 128 KiB (the default line limit, 64 KiB, plus one). A scanner holds its
// buffer only while it holds unread input: the Reader hands it back after
// every Next that leaves nothing buffered, so a caller that stops after one
// envelope does not leave a buffer to the garbage collector.
var bufPools [6]sync.Pool

// getBuf returns a buffer of at least n bytes, from bufPools when one of
// their sizes fits, else nil.
func getBuf(n int) *[]byte {
	for i := range bufPools {
		if size := initialBuffer << i; n <= size {
			if p, ok := bufPools[i].Get().(*[]byte); ok {
				return p
			}
			b := make([]byte, size)
			return &b
		}
	}
	return nil
}

// putBuf gives back a buffer getBuf returned.
func putBuf(p *[]byte) {
	for i := range bufPools {
		if len(*p) == initialBuffer<<i {
			bufPools[i].Put(p)
			return
		}
	}
}

// useBuf makes buf a buffer of n bytes, from bufPools when possible.
func (s *lineScanner) useBuf(n int) {
	if s.pooled = getBuf(n); s.pooled != nil {
		s.buf = (*s.pooled)[:n]
	} else {
		s.buf = make([]byte, n)
	}
}

func (s *lineScanner) init(r io.Reader, maxLine int) {
	*s = lineScanner{r: r, maxLine: maxLine, cr: -1}
	switch m := r.(type) {
	case *bytes.Reader:
		s.inMem = m
	case *strings.Reader:
		s.inMem = m
	case *bytes.Buffer:
		s.inMem = m
	}
	if s.inMem != nil {
		// Input in memory that fits one buffer of the line limit is read
		// in one go: its lines then stay where they are (see stable).
		if n := s.inMem.Len() + 1; n > initialBuffer && n <= maxLine+1 {
			s.useBuf(n)
		}
	}
}

// stable reports that buf holds all the input left: no read will move the
// lines in it, so an envelope's source can be taken from it in one piece.
func (s *lineScanner) stable() bool { return s.direct || s.eof }

// initBytes makes the scanner return lines of data itself: no buffer, no
// copy. The lines are valid as long as data is.
func (s *lineScanner) initBytes(data []byte, maxLine int) {
	*s = lineScanner{buf: data, end: len(data), maxLine: maxLine, eof: true, direct: true, cr: -1}
}

// release drops the buffer, returning it to the pool when it came from
// there. It must be called only when no unread input is buffered
// (start == end) and no line returned from it is still in use.
func (s *lineScanner) release() {
	if s.pooled != nil {
		putBuf(s.pooled)
	}
	s.buf, s.pooled = nil, nil
	s.start, s.end = 0, 0
	s.cr, s.crTo = -1, 0
}

// firstCR returns the position in buf of the first CR at or after start,
// or -1.
func (s *lineScanner) firstCR() int {
	if s.cr >= s.start {
		return s.cr
	}
	from := s.start
	if s.cr < 0 {
		from = max(from, s.crTo) // none before crTo
	}
	s.cr = -1
	if j := bytes.IndexByte(s.buf[from:s.end], '\r'); j >= 0 {
		s.cr = from + j
	}
	s.crTo = s.end
	return s.cr
}

// offset returns the position in the input of a line returned by a
// stable scanner: lines are sub-slices of buf that keep its capacity.
func (s *lineScanner) offset(line []byte) int { return cap(s.buf) - cap(line) }

// sizeHint guesses the size of the envelope whose header was just read:
// the distance to the next "[[END]]" in the next 4 KiB of what is buffered,
// or 1 KiB. The window is bounded so that a long input full of headers
// without [[END]] is not searched to its end once per header.
func (s *lineScanner) sizeHint() int {
	if i := bytes.Index(s.buf[s.start:min(s.end, s.start+initialBuffer)], []byte("[[END]]")); i >= 0 {
		return i + 16
	}
	return 1 << 10
}

// fill reads more input after moving unread bytes to the front, growing
// the buffer when it is full of one unfinished line.
func (s *lineScanner) fill() {
	if s.buf == nil {
		s.useBuf(min(initialBuffer, s.maxLine+1))
	}
	if s.start > 0 {
		n := copy(s.buf, s.buf[s.start:s.end])
		if s.cr >= 0 {
			s.cr -= s.start
		}
		s.crTo = max(0, s.crTo-s.start)
		s.start, s.end = 0, n
	}
	if s.end == len(s.buf) && len(s.buf) < s.maxLine+1 {
		old, oldPool := s.buf, s.pooled
		s.useBuf(min(2*len(s.buf), s.maxLine+1))
		copy(s.buf, old[:s.end])
		if oldPool != nil {
			putBuf(oldPool)
		}
	}
	for s.end < len(s.buf) && !s.eof {
		n, err := s.r.Read(s.buf[s.end:])
		s.end += n
		if err == io.EOF || err == nil && s.inMem != nil && s.inMem.Len() == 0 {
			s.eof = true
		} else if err != nil {
			s.err, s.eof = err, true
		}
		if n > 0 {
			return
		}
	}
}

// next returns the next line without its terminator. The slice is valid
// until the following call. long reports a line over maxLine bytes; its
// content is then nil. ok is false at the end of input.
func (s *lineScanner) next() (line []byte, long, ok bool) {
	if s.skipLF {
		if s.start == s.end {
			s.fill()
		}
		if s.start < s.end && s.buf[s.start] == '\n' {
			s.start++
		}
		s.skipLF = false
	}
	discarding := false
	searched := 0 // bytes of seg known to hold no line end: each byte is looked at once, however small the reads
	for {
		seg := s.buf[s.start:s.end]
		// An LF is looked for only before the first CR: with lone CR
		// line ends, searching the whole buffer for an LF for every line
		// is quadratic in a buffer that holds the whole input
		// (NewBytesReader). No CR in what is buffered (the common case)
		// needs no call.
		lim, cr := len(seg), -1
		if s.cr >= 0 || s.crTo != s.end {
			if c := s.firstCR(); c >= 0 {
				lim, cr = c-s.start, c-s.start
			}
		}
		i := bytes.IndexByte(seg[searched:lim], '\n')
		if i >= 0 {
			i += searched
		} else {
			i = cr
		}
		if i >= 0 {
			s.line++
			if seg[i] == '\r' {
				s.skipLF = true
			}
			s.start += i + 1
			if discarding || i > s.maxLine {
				return nil, true, true
			}
			return seg[:i], false, true
		}
		if s.eof {
			if s.start == s.end {
				if discarding {
					s.line++
					return nil, true, true
				}
				return nil, false, false
			}
			s.line++
			s.start = s.end
			if discarding || len(seg) > s.maxLine {
				return nil, true, true
			}
			return seg, false, true
		}
		searched = len(seg)
		if len(seg) > s.maxLine {
			// Too long to be a line we keep: drop what we have and
			// look for the end of the line in what follows.
			discarding = true
			s.start, searched = s.end, 0
		}
		s.fill()
	}
}
