package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/user"
	"path/filepath"
	"strings"

	"github.com/crosstalk-go/crosstalk/envelope"
)

// composeFlags are the flags new and reply share: who the user is, which
// protocol form to write, and how.
type composeFlags struct {
	user   *string
	config *string
	compat *string
	lossy  *bool
	fence  *bool
	meta   metaFlag
}

func addComposeFlags(fs *flag.FlagSet) *composeFlags {
	c := &composeFlags{
		user:   fs.String("user", "", "the user: line (default: the config's user, else the OS user)"),
		config: fs.String("config", defaultConfigFile(), "config `file` whose user key names the user"),
		compat: fs.String("compat", "", "write for older readers: v1.0 maps REQUEST/RESPOND to QUESTION/ANSWER and refuses what v1.0 lacks"),
		lossy:  fs.Bool("lossy", false, "with --compat v1.0: drop META blocks instead of refusing them"),
		fence:  fs.Bool("fence", false, "wrap the envelope in a fence of three backticks"),
	}
	fs.Var(&c.meta, "meta", "META field as `ns.Key=Value` (repeatable)")
	return c
}

// defaultConfigFile is $XDG_CONFIG_HOME/crosstalk/config.toml (or the
// platform's user config directory), beside the default trust store.
func defaultConfigFile() string {
	d, err := os.UserConfigDir()
	if err != nil {
		return ""
	}
	return filepath.Join(d, "crosstalk", "config.toml")
}

// checkCompat validates --compat and --lossy before any input is read.
func (c *composeFlags) checkCompat() error {
	switch *c.compat {
	case "", "v1.1":
		if *c.lossy {
			return usagef("--lossy only goes with --compat v1.0")
		}
	case "v1.0":
	default:
		return usagef("--compat: %q is not v1.0 or v1.1", *c.compat)
	}
	return nil
}

func (c *composeFlags) v10() bool { return *c.compat == "v1.0" }

// userName returns the user: value: --user, else the config file's user,
// else the OS user. A missing default config file is not an error; a
// named one that cannot be read is.
func (c *composeFlags) userName() (string, error) {
	if u := strings.TrimSpace(*c.user); u != "" {
		return u, nil
	}
	if *c.config != "" {
		cfg, err := LoadConfig(*c.config)
		switch {
		case err == nil && strings.TrimSpace(cfg.User) != "":
			return strings.TrimSpace(cfg.User), nil
		case err != nil && !(errors.Is(err, os.ErrNotExist) && *c.config == defaultConfigFile()):
			return "", err
		}
	}
	return osUser(), nil
}

// osUser is the login name of the OS user ("kalle", not "HOST\kalle"), or
// "user" when the system cannot say.
func osUser() string {
	name := ""
	if u, err := user.Current(); err == nil {
		name = u.Username
	}
	if name == "" {
		name = os.Getenv("USER")
	}
	if i := strings.LastIndexAny(name, `\/`); i >= 0 {
		name = name[i+1:]
	}
	if name = strings.TrimSpace(name); name == "" || strings.ContainsAny(name, "\r\n") {
		return "user"
	}
	return name
}

// write fills in the user and META blocks and writes env in the form the
// flags ask for.
func (c *composeFlags) write(e *env, env *envelope.Envelope) error {
	u, err := c.userName()
	if err != nil {
		return err
	}
	env.User = u
	env.Meta = c.meta.blocks
	var out bytes.Buffer
	w := envelope.NewWriter(&out)
	w.Fence = *c.fence
	if c.v10() {
		env, err = envelope.ToV10(env, envelope.V10Options{DropMeta: *c.lossy})
		if err != nil {
			if len(c.meta.blocks) > 0 && !*c.lossy {
				return fmt.Errorf("--compat v1.0: %w (add --lossy to drop them)", err)
			}
			return fmt.Errorf("--compat v1.0: %w", err)
		}
		w.V10 = true
	}
	if err := w.Write(env); err != nil {
		return err
	}
	if err := readsBack(out.Bytes()); err != nil {
		return err
	}
	_, err = e.stdout.Write(out.Bytes())
	return err
}

// readsBack refuses a composed envelope that readers would refuse: one
// over the limits of docs/format.md §8 (a body line over 64 KiB, more than
// 1 MiB in all), which the Writer writes but no Reader, relay or
// `crosstalk validate` reads.
func readsBack(b []byte) error {
	_, err := envelope.NewReader(bytes.NewReader(b)).Next()
	var se *envelope.SyntaxError
	if errors.As(err, &se) {
		return fmt.Errorf("the envelope would be refused by its readers (docs/format.md §8): line %d of it: %s: %s", se.Line, se.Code, se.Msg)
	}
	return nil
}
