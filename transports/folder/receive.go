package folder

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/fsnotify/fsnotify"

	"github.com/crosstalk-go/crosstalk/envelope"
	"github.com/crosstalk-go/crosstalk/transports"
)

// entry is what the Receiver knows of a file it has seen and not finished.
type entry struct {
	name    string
	first   time.Time   // first seen
	seen    fs.FileInfo // the file as last observed, nil before the first look
	changed time.Time   // when a change (or an event) was last observed

	// The last read that found the file incomplete, and why.
	read   bool
	readFI fs.FileInfo
	why    string

	retryAt  time.Time // after a Handler failure
	failures int
	stuck    bool // handled but could not be moved: wait for a change

	// next is when the entry is worth a look again (zero: at the next
	// tick). A file that waits — to settle, for a retry, to complete —
	// is not looked at on every tick: 100 000 files waiting cost 800 000
	// stat calls a second.
	next time.Time
}

// receiver is the state of one Receive call.
type receiver struct {
	f       *Folder
	h       transports.Handler
	perm    fs.FileMode // of the watched directory, for processed/ and failed/
	pending map[string]*entry
}

// Receive watches the directory and hands every complete file to h (see
// the package documentation for what counts as complete and where files
// go). It returns nil when ctx ends, and an error when the directory
// cannot be watched or disappears.
func (f *Folder) Receive(ctx context.Context, h transports.Handler) error {
	f.mu.Lock()
	if f.receiving {
		f.mu.Unlock()
		return ErrBusy
	}
	f.receiving = true
	f.mu.Unlock()
	defer func() {
		f.mu.Lock()
		f.receiving = false
		f.mu.Unlock()
	}()

	fi, err := os.Stat(f.dir)
	if err != nil {
		return fmt.Errorf("folder: watching %s: %w", f.dir, err)
	}
	if !fi.IsDir() {
		return fmt.Errorf("folder: watching %s: not a directory", f.dir)
	}
	r := &receiver{f: f, h: h, perm: fi.Mode().Perm() | 0o700, pending: map[string]*entry{}}

	var events <-chan fsnotify.Event
	var errs <-chan error
	w, err := fsnotify.NewWatcher()
	if err == nil && f.noNotify {
		w.Close()
		err = errors.New("change notifications disabled")
	}
	if err == nil {
		if err = w.Add(f.dir); err != nil {
			w.Close()
		}
	}
	if err != nil {
		// inotify limits reached, or an unsupported file system: the
		// rescan still finds every file, only later.
		f.log.Warn("folder: no change notifications, relying on the periodic rescan", "dir", f.dir, "rescan", f.rescan, "err", err)
	} else {
		defer w.Close()
		events, errs = w.Events, w.Errors
	}

	if err := r.scan(); err != nil {
		return err
	}
	f.log.Info("folder: watching", "dir", f.dir, "settle", f.settle, "rescan", f.rescan, "timeout", f.timeout)
	rescan := time.NewTicker(f.rescan)
	defer rescan.Stop()
	tick := time.NewTicker(f.tickInterval())
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case ev, ok := <-events:
			if !ok {
				events = nil
				continue
			}
			if filepath.Dir(ev.Name) == f.dir {
				r.note(filepath.Base(ev.Name), true)
			}
		case err, ok := <-errs:
			if !ok {
				errs = nil
				continue
			}
			// Typically a queue overflow: events were lost.
			f.log.Warn("folder: change notification error, rescanning", "dir", f.dir, "err", err)
			if err := r.scan(); err != nil {
				return err
			}
		case <-rescan.C:
			if err := r.scan(); err != nil {
				return err
			}
		case <-tick.C:
			r.check(ctx)
		}
	}
}

// tickInterval is how often pending files are looked at.
func (f *Folder) tickInterval() time.Duration {
	return min(max(f.settle/4, 10*time.Millisecond), 250*time.Millisecond)
}

// scan lists the directory and notes every wanted file.
func (r *receiver) scan() error {
	des, err := os.ReadDir(r.f.dir)
	if errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("folder: the watched directory %s is gone: %w", r.f.dir, err)
	}
	if err != nil {
		r.f.log.Warn("folder: rescan failed", "dir", r.f.dir, "err", err)
		return nil
	}
	for _, de := range des {
		if !de.IsDir() {
			r.note(de.Name(), false)
		}
	}
	return nil
}

// note records that name exists or changed (event is true for a change
// notification, which restarts the settle time).
func (r *receiver) note(name string, event bool) {
	if !wanted(name) {
		return
	}
	now := time.Now()
	e, ok := r.pending[name]
	if !ok {
		r.pending[name] = &entry{name: name, first: now, changed: now}
		return
	}
	if event {
		e.changed = now
		e.stuck = false
		e.next = time.Time{}
	}
}

// check looks at every pending file and handles those that are ready.
func (r *receiver) check(ctx context.Context) {
	if len(r.pending) == 0 {
		return
	}
	now := time.Now()
	var es []*entry
	for _, e := range r.pending {
		if !now.Before(e.next) {
			es = append(es, e)
		}
	}
	// Oldest first: a folder promises no order, but this is the fairest.
	sort.Slice(es, func(i, j int) bool {
		if !es[i].first.Equal(es[j].first) {
			return es[i].first.Before(es[j].first)
		}
		return es[i].name < es[j].name
	})
	for _, e := range es {
		if ctx.Err() != nil {
			return
		}
		r.checkOne(ctx, e)
	}
}

func (r *receiver) checkOne(ctx context.Context, e *entry) {
	f := r.f
	f.looks.Add(1)
	path := filepath.Join(f.dir, e.name)
	now := time.Now()
	fi, err := os.Lstat(path)
	if errors.Is(err, fs.ErrNotExist) {
		delete(r.pending, e.name) // moved away (a rename-save's old name) or deleted
		return
	}
	if err != nil {
		f.log.Warn("folder: cannot stat file", "file", path, "err", err)
		r.idle(e, now)
		return
	}
	switch {
	case fi.IsDir():
		delete(r.pending, e.name)
		return
	case unsafeName(e.name) != "":
		r.refuse(e, unsafeName(e.name))
		return
	case fi.Mode()&fs.ModeSymlink != 0:
		r.refuse(e, "a symbolic link: links are never followed, wherever they point; copy the file into the folder instead")
		return
	case !fi.Mode().IsRegular():
		r.refuse(e, fmt.Sprintf("not a regular file (%s)", fi.Mode().Type()))
		return
	case linkCount(fi) > 1:
		r.refuse(e, fmt.Sprintf("the file has %d hard links, so it may be a file from outside the folder; copy it instead", linkCount(fi)))
		return
	case fi.Size() > MaxFileSize:
		r.refuse(e, fmt.Sprintf("the file is %d bytes, larger than the limit of %d bytes (E-TOO-LARGE)", fi.Size(), MaxFileSize))
		return
	}
	// Another file under the name (a rename, a move) is a change even
	// with the same size and time: a stuck file replaced so is new.
	if e.seen == nil || !sameState(e.seen, fi) {
		e.seen, e.changed, e.stuck = fi, now, false
		e.next = now.Add(f.settle)
		return
	}
	switch {
	case e.stuck:
		r.idle(e, now)
		return
	case now.Before(e.retryAt):
		e.next = e.retryAt
		return
	case now.Sub(e.changed) < f.settle:
		e.next = e.changed.Add(f.settle)
		return
	}
	quietFor := now.Sub(e.changed)
	if e.read && sameState(e.readFI, fi) {
		// Known to be incomplete, and unchanged since.
		if quietFor >= f.timeout {
			r.refuse(e, fmt.Sprintf("never completed: %s, and the file did not change for %s", e.why, f.timeout))
			return
		}
		r.idle(e, now)
		return
	}
	data, err := readFile(path, fi)
	if errors.Is(err, errChanged) {
		e.changed = now
		return
	}
	if err != nil {
		if quietFor >= f.timeout {
			r.refuse(e, fmt.Sprintf("cannot be read: %v", err))
			return
		}
		e.failures++
		e.retryAt = now.Add(backoff(e.failures))
		f.log.Warn("folder: cannot read file, will retry", "file", path, "err", err, "retry_in", backoff(e.failures))
		return
	}
	complete, why, p := inspect(data)
	if !complete {
		e.read, e.readFI, e.why = true, fi, why
		f.log.Debug("folder: file incomplete, waiting", "file", path, "why", why)
		if quietFor >= f.timeout {
			r.refuse(e, fmt.Sprintf("never completed: %s, and the file did not change for %s", why, f.timeout))
			return
		}
		r.idle(e, now)
		return
	}
	reply, err := r.h(ctx, transports.Inbound{Transport: "folder", Source: path, Data: data})
	if errors.Is(err, transports.ErrPermanent) {
		r.refuse(e, "the handler refused the whole file, nothing of it was recorded: "+err.Error())
		return
	}
	if err != nil {
		if ctx.Err() != nil {
			return // shutting down: the file stays for the next run
		}
		e.failures++
		e.retryAt = time.Now().Add(backoff(e.failures))
		f.log.Warn("folder: handler failed, the file stays and is offered again", "file", path, "err", err, "retry_in", backoff(e.failures))
		return
	}
	// A writer may have appended while the Handler ran, or replaced the
	// file (a rename-save that may keep size and time): then the file is
	// not moved but offered again, whole, once it settles (the relay
	// de-duplicates what it already recorded).
	if now, err := os.Lstat(path); err == nil && !sameState(now, fi) {
		e.seen, e.changed, e.read = now, time.Now(), false
		f.log.Info("folder: file changed while it was handled; offering it again", "file", path)
		return
	}
	target, ok := r.finish(e, p, reply)
	if ok {
		r.afterMove(ctx, target, fi)
	}
}

// idle schedules the next look at a file that did not change: after half
// the time it has been quiet, at least a tick and at most a rescan
// interval later, and no later than the moment it would time out. A
// change notification looks at it at once; without notifications a
// change to a file quiet for long is seen up to one rescan interval late.
func (r *receiver) idle(e *entry, now time.Time) {
	d := min(max(now.Sub(e.changed)/2, r.f.tickInterval()), r.f.rescan)
	e.next = now.Add(d)
	if dl := e.changed.Add(r.f.timeout); dl.After(now) && e.next.After(dl) {
		e.next = dl
	}
}

// sameState reports whether a and b describe the same file with the same
// size and modification time.
func sameState(a, b fs.FileInfo) bool {
	return os.SameFile(a, b) && a.Size() == b.Size() && a.ModTime().Equal(b.ModTime())
}

// maxReoffers bounds how often afterMove hands a moved file over again.
const maxReoffers = 10

// afterMove checks a file moved to processed/ or failed/ against what was
// handled (fi): a writer that kept the file open may have appended between
// the last check and the move. Then the moved file is read and handed over
// again, whole, until it stays as handled; it is not moved back.
func (r *receiver) afterMove(ctx context.Context, target string, fi fs.FileInfo) {
	for range maxReoffers {
		now, err := os.Lstat(target)
		if err != nil || sameState(now, fi) || !now.Mode().IsRegular() {
			return
		}
		data, err := readFile(target, now)
		if err != nil {
			continue // changing again: look again
		}
		r.f.log.Warn("folder: file grew after it was moved; handing it over again", "file", target)
		if _, err := r.h(ctx, transports.Inbound{Transport: "folder", Source: target, Data: data}); err != nil {
			r.f.log.Error("folder: handing over a file that grew after its move failed", "file", target, "err", err)
			return
		}
		fi = now
	}
}

// backoff is the wait before offering a file again after its n-th failure:
// 1 s doubling to 1 min.
func backoff(n int) time.Duration {
	d := time.Second
	for i := 1; i < n && d < time.Minute; i++ {
		d *= 2
	}
	return min(d, time.Minute)
}

// errChanged is returned by readFile when the file changed between the
// Lstat and the open.
var errChanged = errors.New("folder: file changed while opening")

// readFile reads the regular file fi describes, refusing to follow a
// symbolic link swapped in since the Lstat.
func readFile(path string, fi fs.FileInfo) ([]byte, error) {
	fh, err := openNoFollow(path)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, errChanged
		}
		return nil, err
	}
	defer fh.Close()
	ofi, err := fh.Stat()
	if err != nil {
		return nil, err
	}
	if !ofi.Mode().IsRegular() || !os.SameFile(fi, ofi) {
		return nil, errChanged
	}
	data, err := io.ReadAll(io.LimitReader(fh, MaxFileSize+1))
	if err != nil {
		return nil, err
	}
	if int64(len(data)) != fi.Size() {
		return nil, errChanged // written to since the Lstat
	}
	return data, nil
}

// parsed is what the Receiver's own parse of a complete file found.
type parsed struct {
	good int      // envelopes that parsed
	errs []string // syntax errors, one per malformed envelope
}

// inspect reports whether data is a complete file (the last line is
// [[END]] and every envelope is terminated), why not, and what it holds.
func inspect(data []byte) (complete bool, why string, p parsed) {
	if !endsWithEnd(data) {
		return false, "the last line is not [[END]]", p
	}
	rd := envelope.NewBytesReader(data)
	for {
		env, err := rd.Next()
		if err == io.EOF {
			return true, "", p
		}
		var se *envelope.SyntaxError
		if errors.As(err, &se) {
			p.errs = append(p.errs, fmt.Sprintf("%s: line %d: %s", se.Code, se.Line, se.Msg))
			continue
		}
		if err != nil {
			p.errs = append(p.errs, err.Error())
			return true, "", p
		}
		if !env.Complete {
			return false, fmt.Sprintf("the envelope at line %d has no [[END]]", env.Line), p
		}
		p.good++
	}
}

// endsWithEnd reports whether the last non-blank line of data, not
// counting closing fence lines, is [[END]] at column 0 (after one level of
// "> " quoting, which the envelope Reader allows; docs/design.md §3.1). Trailing
// blanks and any line ending (LF, CRLF, CR) are fine.
func endsWithEnd(data []byte) bool {
	lines := strings.FieldsFunc(string(data), func(r rune) bool { return r == '\n' || r == '\r' })
	for i := len(lines) - 1; i >= 0; i-- {
		l := strings.TrimRight(lines[i], " \t")
		if q, ok := strings.CutPrefix(l, ">"); ok {
			l = strings.TrimPrefix(q, " ")
		}
		switch {
		case l == "":
			continue
		case isClosingFence(l):
			continue
		default:
			return l == "[[END]]"
		}
	}
	return false
}

func isClosingFence(l string) bool {
	if len(l) < 3 || (l[0] != '`' && l[0] != '~') {
		return false
	}
	return strings.Trim(l, l[:1]) == ""
}

// finish moves a handled file: to failed/ when every envelope in it was
// rejected, else to processed/ (with a .error beside it when some were).
// It returns where the file went, and false when it could not be moved.
func (r *receiver) finish(e *entry, p parsed, reply []byte) (string, bool) {
	f := r.f
	all, rejected := judge(p, reply)
	sub, msg := ProcessedDir, ""
	switch {
	case all:
		sub, msg = FailedDir, "rejected: no envelope in the file was accepted"
	case len(rejected) > 0:
		msg = fmt.Sprintf("partly rejected: %d envelope(s) in the file were not accepted", len(rejected))
	}
	var details strings.Builder
	for _, s := range rejected {
		details.WriteString("  - " + s + "\n")
	}
	if len(reply) > 0 && msg != "" {
		details.WriteString("\nThe relay's reply:\n\n")
		details.Write(reply)
	}
	target, err := r.move(e.name, sub, e.name, msg, details.String())
	if err != nil {
		e.stuck = true
		f.log.Error("folder: handled, but cannot move the file; it will not be offered again until it changes", "file", e.name, "to", sub, "err", err)
		return "", false
	}
	delete(r.pending, e.name)
	if all {
		f.log.Warn("folder: file rejected", "file", e.name, "moved_to", target, "rejected", len(rejected))
	} else {
		f.log.Info("folder: file processed", "file", e.name, "moved_to", target, "rejected", len(rejected))
	}
	return target, true
}

// judge decides from the Handler's reply (receipts: ACK or ERROR
// envelopes, or the ERROR envelopes alone) or, without one, from the
// file's own parse whether every envelope was rejected, and lists the
// rejections.
func judge(p parsed, reply []byte) (all bool, rejected []string) {
	acks := 0
	rd := envelope.NewBytesReader(reply)
	for {
		env, err := rd.Next()
		if err == io.EOF || err != nil && !errors.As(err, new(*envelope.SyntaxError)) {
			break
		}
		if err != nil {
			continue
		}
		if env.Intent != envelope.IntentError {
			acks++
			continue
		}
		code, _ := env.MetaValue("error", "Code")
		reason, _ := env.MetaValue("error", "Reason")
		s := strings.TrimSpace(code + ": " + reason)
		// The relay's body is the error with its line ("E-FORMAT: line
		// 3: …"), which Reason lacks.
		if body := strings.TrimSpace(env.Body); code != "" && strings.HasPrefix(body, code+": ") && !strings.Contains(body, "\n") {
			s = body
		}
		if env.Parent != "" {
			s = "message " + env.Parent + ": " + s
		}
		rejected = append(rejected, s)
	}
	switch {
	case acks > 0:
		return false, rejected
	case len(rejected) > 0:
		// Only ERROR envelopes: a handler may list the rejections
		// alone (gateway.Relay.Handler does), so every envelope was
		// rejected only if there are as many as the file holds.
		return len(rejected) >= max(p.good+len(p.errs), 1), rejected
	}
	if p.good == 0 {
		if len(p.errs) == 0 {
			return true, []string{"E-FORMAT: no envelope found in the file"}
		}
		return true, p.errs
	}
	return false, p.errs
}

// refuse moves a file to failed/ without handing it to the Handler.
func (r *receiver) refuse(e *entry, why string) {
	f := r.f
	target := e.name
	if unsafeName(e.name) != "" {
		stem, ext := splitExt(e.name)
		target = SafeName(stem) + ext
	}
	moved, err := r.move(e.name, FailedDir, target, "refused: "+why, "")
	if err != nil {
		// Refused again at each look, which is not every tick: the
		// move is tried again as a waiting file is looked at.
		e.stuck = true
		r.idle(e, time.Now())
		f.log.Error("folder: cannot move a refused file to failed/", "file", fmt.Sprintf("%q", e.name), "reason", why, "err", err)
		return
	}
	delete(r.pending, e.name)
	f.log.Warn("folder: file refused", "file", fmt.Sprintf("%q", e.name), "moved_to", moved, "reason", why)
}

// move renames name into sub/ under a free name based on target and, when
// msg is set, writes the .error file beside it. It returns the new path.
func (r *receiver) move(name, sub, target, msg, details string) (string, error) {
	dst := filepath.Join(r.f.dir, sub)
	if err := os.MkdirAll(dst, r.perm); err != nil {
		return "", fmt.Errorf("folder: %w", err)
	}
	if fi, err := os.Lstat(dst); err != nil || !fi.IsDir() {
		return "", fmt.Errorf("folder: %s is not a directory", dst)
	}
	free, err := freeName(dst, target)
	if err != nil {
		return "", err
	}
	to := filepath.Join(dst, free)
	if err := os.Rename(filepath.Join(r.f.dir, name), to); err != nil {
		return "", fmt.Errorf("folder: moving %q to %s: %w", name, sub, err)
	}
	if msg != "" {
		text := fmt.Sprintf("folder: %s: %s\nfile: %q\ntime: %s\n", free, msg, name, time.Now().UTC().Format(time.RFC3339))
		if details != "" {
			text += "\n" + details
		}
		if err := writeAtomic(to+ErrorSuffix, []byte(text), 0o644); err != nil {
			r.f.log.Error("folder: cannot write the .error file", "file", to+ErrorSuffix, "err", err)
		}
	}
	return to, nil
}

// maxName is the longest file name, in bytes, this package creates: 255
// is the limit of ext4, XFS, Btrfs, APFS and NTFS.
const maxName = 255

// maxNumbered is how many "-N" names freeName tries before it names the
// file by the time.
const maxNumbered = 100

// freeName returns name, or name with "-N" before its extension (N up to
// 99), or else with "-<UTC time>[-N]", such that neither it nor its .error
// file exists in dir. A name too long for that (with room for the
// suffixes) is shortened, keeping its start, its extension and a short
// hash of the whole name, so that it still tells where it came from and
// two long names do not meet; the .error file records the original name.
//
// A tool that always writes the same name fills NAME-1 … NAME-99 within
// weeks; counting on through every taken name made each move slower and
// ended, at the ten-thousandth, in a file that could not be moved at all.
func freeName(dir, name string) (string, error) {
	orig := name
	name = shorten(name, maxName-len(ErrorSuffix)-len("-9999"))
	stem, ext := splitExt(name)
	stamp := time.Now().UTC().Format("20060102T150405Z")
	for n := 0; n < maxNumbered+1000; n++ {
		var cand string
		switch {
		case n == 0:
			cand = name
		case n < maxNumbered:
			cand = fmt.Sprintf("%s-%d%s", stem, n, ext)
		default:
			suffix := "-" + stamp
			if k := n - maxNumbered; k > 0 {
				suffix += fmt.Sprintf("-%d", k)
			}
			s, e := splitExt(shorten(orig, maxName-len(ErrorSuffix)-len(suffix)))
			cand = s + suffix + e
		}
		free, err := absent(filepath.Join(dir, cand))
		if err != nil {
			return "", err
		}
		if !free {
			continue
		}
		if free, err = absent(filepath.Join(dir, cand+ErrorSuffix)); err != nil {
			return "", err
		} else if free {
			return cand, nil
		}
	}
	return "", fmt.Errorf("folder: no free name for %q in %s", name, dir)
}

// absent reports whether nothing exists at path; an error other than "does
// not exist" (a name too long, a permission) is returned, never taken for
// "exists".
func absent(path string) (bool, error) {
	_, err := os.Lstat(path)
	switch {
	case err == nil:
		return false, nil
	case errors.Is(err, fs.ErrNotExist):
		return true, nil
	}
	return false, fmt.Errorf("folder: %w", err)
}

// shorten returns name if it has at most limit bytes, else its stem cut at
// a character boundary, "~", an 8-hex-digit hash of name, and its
// extension, in limit bytes.
func shorten(name string, limit int) string {
	if len(name) <= limit {
		return name
	}
	stem, ext := splitExt(name)
	if len(ext) > 16 {
		stem, ext = name, ""
	}
	sum := sha256.Sum256([]byte(name))
	tail := "~" + hex.EncodeToString(sum[:4]) + ext
	cut := limit - len(tail)
	for cut > 0 && !utf8.RuneStart(stem[cut]) {
		cut--
	}
	return stem[:cut] + tail
}
