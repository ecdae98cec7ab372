package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/crosstalk-go/crosstalk/conformance"
)

var cmdConformance = &command{
	name:    "conformance",
	args:    "[--manifest FILE] [--strict-arg ARG]... [--] CMD [ARGS...]",
	summary: "check another envelope parser against the conformance cases",
	run:     runConformance,
}

// stringList is a repeatable string flag.
type stringList []string

func (s *stringList) String() string     { return strings.Join(*s, " ") }
func (s *stringList) Set(v string) error { *s = append(*s, v); return nil }

func runConformance(ctx context.Context, e *env, args []string) error {
	fs := newFlags(e, `
Conformance runs an envelope parser — CMD with ARGS — once per case of the
conformance manifest (fixtures/conformance/manifest.json, built in), with the
case's input on standard input, and compares the JSON Lines it prints with the
expected ones: envelopes as JSON values, errors by code and line
(docs/conformance.md). It prints one row per case and ends with
"N passed, M failed". The first argument that is not a flag starts CMD, so
CMD's own flags need no "--".

Strict cases run with the --strict-arg arguments appended to ARGS; without
them they are skipped. Example, for crosstalk itself:

  crosstalk conformance --strict-arg --strict -- crosstalk parse --json

Exit status: 0 if every case passed, 1 if any failed or CMD cannot run,
2 for usage errors.`)
	manifest := fs.String("manifest", "", "manifest `file` (default: the built-in fixtures/conformance/manifest.json)")
	var strict stringList
	fs.Var(&strict, "strict-arg", "`ARG` to append to CMD's arguments for strict cases (repeatable)")
	timeout := fs.Duration("timeout", 10*time.Second, "time limit for one case")
	jobs := fs.Int("jobs", 2, "cases run at once")
	failuresOnly := fs.Bool("failures", false, "print rows for failed cases only")
	usage := fs.Usage
	fs.Usage = func() {}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			usage()
			return err
		}
		return usagef("conformance: %v (see `crosstalk conformance --help`)", err)
	}
	cmdArgs := fs.Args()
	if len(cmdArgs) == 0 {
		return usagef("conformance: no parser command given (e.g. crosstalk conformance -- ./myparser --json)")
	}
	if *jobs < 1 || *timeout <= 0 {
		return usagef("conformance: --jobs and --timeout must be positive")
	}
	var m *conformance.Manifest
	var err error
	if *manifest == "" {
		m, err = conformance.Default()
	} else {
		var data []byte
		if data, err = os.ReadFile(*manifest); err == nil {
			m, err = conformance.Parse(data)
		}
	}
	if err != nil {
		return err
	}
	results, err := conformance.Run(ctx, m, conformance.Options{
		Command: cmdArgs, StrictArgs: strict, Timeout: *timeout, Workers: *jobs,
	})
	if err != nil {
		return err
	}
	tw := tabwriter.NewWriter(e.stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "RESULT\tCASE\tDETAIL")
	passed, failed, skipped := 0, 0, 0
	for _, r := range results {
		switch {
		case r.Skipped:
			skipped++
			if !*failuresOnly {
				fmt.Fprintf(tw, "skip\t%s\tstrict case: give --strict-arg\n", r.Case.Name)
			}
		case r.Err != nil:
			failed++
			fmt.Fprintf(tw, "FAIL\t%s\t%s\n", r.Case.Name, oneLineText(r.Err.Error()))
		default:
			passed++
			if !*failuresOnly {
				fmt.Fprintf(tw, "pass\t%s\t\n", r.Case.Name)
			}
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if skipped > 0 {
		fmt.Fprintf(e.stdout, "%d skipped (strict cases; give --strict-arg)\n", skipped)
	}
	fmt.Fprintf(e.stdout, "%d passed, %d failed\n", passed, failed)
	if failed > 0 {
		return failedError{}
	}
	return nil
}

// oneLineText keeps a table cell on one line.
func oneLineText(s string) string {
	return strings.NewReplacer("\r", " ", "\n", " ", "\t", " ").Replace(s)
}
