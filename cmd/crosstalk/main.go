// Command crosstalk finds, parses, formats, composes, signs and verifies AI
// Crosstalk envelopes, and runs the crosstalk relay.
//
// Run `crosstalk help` for the list of commands and `crosstalk CMD --help`
// for one of them.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/url"
	"os"
	"os/signal"
	"sort"
	"strings"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	context.AfterFunc(ctx, stop) // a second signal ends the process at once
	code := run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// env is what a command gets to work with: its standard streams. Commands
// never touch os.Stdin/os.Stdout directly, so tests run them in-process.
type env struct {
	stdin          io.Reader
	stdout, stderr io.Writer
	// cmd is the command being run, for its usage.
	cmd *command
}

// sub returns e for the subcommand cmd.
func (e *env) sub(cmd *command) *env {
	c := *e
	c.cmd = cmd
	return &c
}

// command is one subcommand.
type command struct {
	name    string
	args    string // synopsis after the name
	summary string
	run     func(ctx context.Context, e *env, args []string) error
}

// commands is the subcommand table. A command's run finds its own
// command in env.cmd, so that the table and the functions do not refer to
// each other (an initialisation cycle).
var commands = []*command{
	cmdParse, cmdFmt, cmdNew, cmdReply, cmdValidate,
	cmdRelay, cmdSend, cmdLog, cmdInbox, cmdAck, cmdClaim, cmdDischarge,
	cmdHandoff, cmdBlocked, cmdForward,
	cmdReserve, cmdRelease, cmdReservations, cmdHeartbeat,
	cmdKeygen, cmdSign, cmdVerify, cmdTrust, cmdToken,
	cmdMCP, cmdHarness,
	cmdLedger,
	cmdWatch, cmdClip,
	cmdConformance,
}

// Exit codes, decided here and nowhere else.
const (
	exitOK      = 0
	exitFailure = 1 // something in the input was bad, or the work failed
	exitUsage   = 2 // the command line was wrong
)

// usageError is a mistake on the command line: exit code 2.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error {
	return &usageError{fmt.Sprintf(format, args...)}
}

// failedError reports that some input was bad after the command already
// printed what it found: exit code 1, nothing more printed.
type failedError struct{}

func (failedError) Error() string { return "some input failed" }

// hintError carries a hint line printed after the error.
type hintError struct {
	err  error
	hint string
}

func (e *hintError) Error() string { return e.err.Error() }
func (e *hintError) Unwrap() error { return e.err }

func withHint(err error, hint string) error { return &hintError{err, hint} }

func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	e := &env{stdin: stdin, stdout: stdout, stderr: stderr}
	if len(args) == 0 {
		printUsage(stderr)
		return exitUsage
	}
	name := args[0]
	if name == "help" || name == "-h" || name == "--help" || name == "-help" {
		if len(args) > 1 {
			return run(ctx, []string{args[1], "--help"}, stdin, stdout, stderr)
		}
		printUsage(stdout)
		return exitOK
	}
	cmd := lookup(name)
	if cmd == nil {
		fmt.Fprintf(stderr, "crosstalk: error: unknown command %q\n", name)
		if s := suggest(name); s != "" {
			fmt.Fprintf(stderr, "hint: did you mean %q?\n", s)
		}
		fmt.Fprintln(stderr, "hint: run `crosstalk help` for the list of commands")
		return exitUsage
	}
	e.cmd = cmd
	err := cmd.run(ctx, e, args[1:])
	code := exitCode(stderr, err)
	if code != exitOK && !errors.Is(err, failedError{}) && wantsJSON(args[1:]) {
		// A script reading --json output gets JSON on failure too; a
		// command that printed its own JSON answer returned failedError.
		writeJSONError(stdout, code, err)
	}
	return code
}

// wantsJSON reports whether a command's arguments ask for --json (before
// a "--" that ends the flags).
func wantsJSON(args []string) bool {
	for _, a := range args {
		switch a {
		case "--":
			return false
		case "--json", "-json", "--json=true", "-json=true":
			return true
		}
	}
	return false
}

// commandError is what a --json command prints on stdout when it fails
// before printing an answer: ok false and the error, with "usage" for a
// mistake on the command line (exit 2) and "failed" otherwise (exit 1).
type commandError struct {
	OK    bool `json:"ok"`
	Error struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

func writeJSONError(w io.Writer, code int, err error) {
	var je commandError
	je.Error.Code, je.Error.Message = "failed", err.Error()
	if code == exitUsage {
		je.Error.Code = "usage"
	}
	json.NewEncoder(w).Encode(je)
}

func exitCode(stderr io.Writer, err error) int {
	var ue *usageError
	var he *hintError
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp):
		return exitOK
	case errors.As(err, &ue):
		fmt.Fprintf(stderr, "crosstalk: error: %s\n", ue.msg)
		return exitUsage
	case errors.Is(err, failedError{}):
		return exitFailure
	case errors.As(err, &he):
		fmt.Fprintf(stderr, "crosstalk: error: %s\nhint: %s\n", he.err, he.hint)
		return exitFailure
	default:
		fmt.Fprintf(stderr, "crosstalk: error: %s\n", err)
		if unauthorized(err) {
			fmt.Fprintf(stderr, "hint: %s\n", tokenHint)
		}
		return exitFailure
	}
}

func lookup(name string) *command {
	for _, c := range allCommands() {
		if c.name == name {
			return c
		}
	}
	return nil
}

func allCommands() []*command {
	return append([]*command{cmdHelp}, commands...)
}

var cmdHelp = &command{name: "help", args: "[COMMAND]", summary: "show help for crosstalk or one command"}

func printUsage(w io.Writer) {
	fmt.Fprintln(w, "crosstalk — find, check, sign and relay AI Crosstalk envelopes")
	fmt.Fprintln(w, "\nusage: crosstalk COMMAND [flags] [args]")
	fmt.Fprintln(w, "\ncommands:")
	cmds := allCommands()
	sort.Slice(cmds, func(i, j int) bool { return cmds[i].name < cmds[j].name })
	width := 0
	for _, c := range cmds {
		width = max(width, len(c.name))
	}
	for _, c := range cmds {
		fmt.Fprintf(w, "  %-*s  %s\n", width, c.name, c.summary)
	}
	fmt.Fprintln(w, "\nRun `crosstalk COMMAND --help` for a command's flags.")
}

// suggest returns the command whose name is closest to name, if close.
func suggest(name string) string {
	for _, c := range allCommands() {
		if strings.HasPrefix(c.name, name) || strings.HasPrefix(name, c.name) {
			return c.name
		}
	}
	return ""
}

// newFlags returns a flag set for the command e runs whose usage,
// printed for --help by parseFlags, goes to e.stdout.
func newFlags(e *env, doc string) *flag.FlagSet {
	cmd := e.cmd
	fs := flag.NewFlagSet(cmd.name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {
		w := e.stdout
		fmt.Fprintf(w, "usage: crosstalk %s %s\n\n%s\n", cmd.name, cmd.args, strings.TrimSpace(doc))
		var has bool
		fs.VisitAll(func(*flag.Flag) { has = true })
		if has {
			fmt.Fprintln(w, "\nflags:")
			fs.SetOutput(w)
			fs.PrintDefaults()
			fs.SetOutput(io.Discard)
		}
	}
	return fs
}

// parseFlags parses args with flags and positional arguments in any order
// (`crosstalk parse file.txt --json` works); "--" ends the flags. It prints
// the usage for --help only: a mistyped flag is one error line on stderr,
// nothing on stdout. A --relay flag must hold an http(s) URL.
func parseFlags(fs *flag.FlagSet, args []string) ([]string, error) {
	// The flag package calls Usage on every parse error, not only for -help.
	usage := fs.Usage
	fs.Usage = func() {}
	defer func() { fs.Usage = usage }()
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				usage()
				return nil, err
			}
			return nil, usagef("%s: %v (see `crosstalk %s --help`)", fs.Name(), err, fs.Name())
		}
		rest := fs.Args()
		if consumed := len(args) - len(rest); consumed > 0 && args[consumed-1] == "--" {
			return append(pos, rest...), checkRelayFlag(fs)
		}
		if len(rest) == 0 {
			return pos, checkRelayFlag(fs)
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
}

// checkRelayFlag refuses a --relay value (from the flag or
// $CROSSTALK_RELAY) that is not an http or https URL with a host, such as
// "127.0.0.1:7777": it could never be reached, and retrying it only delays
// the error. An empty --relay is refused too where the flag has a default
// (--relay= would otherwise post to the URL ""); where it has none (watch,
// clip) empty means "print, do not forward".
func checkRelayFlag(fs *flag.FlagSet) error {
	f := fs.Lookup("relay")
	if f == nil || f.Value.String() == "" && f.DefValue == "" {
		return nil
	}
	u, err := url.Parse(f.Value.String())
	if err == nil && (u.Scheme == "http" || u.Scheme == "https") && u.Host != "" {
		return nil
	}
	from := "--relay"
	if !flagSet(fs, "relay") && os.Getenv("CROSSTALK_RELAY") == f.Value.String() {
		from = "$CROSSTALK_RELAY"
	}
	return usagef("%s: %s %q is not a relay URL; want one like http://%s", fs.Name(), from, f.Value.String(), DefaultListen)
}

// flagSet reports whether the flag name was given on the command line
// (an empty value included).
func flagSet(fs *flag.FlagSet, name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}

// input is one named input: a file or standard input.
type input struct {
	name string
	r    io.Reader
	c    io.Closer
}

// openInputs opens the named files in turn ("-" or none: standard input).
// Each is closed after fn returns.
func eachInput(e *env, names []string, fn func(in input) error) error {
	if len(names) == 0 {
		names = []string{"-"}
	}
	for _, n := range names {
		in := input{name: n, r: e.stdin}
		if n == "-" {
			in.name = "<stdin>"
		} else {
			f, err := os.Open(n)
			if err != nil {
				return err
			}
			in.r, in.c = f, f
		}
		err := fn(in)
		if in.c != nil {
			in.c.Close()
		}
		if err != nil {
			return err
		}
	}
	return nil
}
