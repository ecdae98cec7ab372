package main

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"time"
	"unicode"

	"github.com/BurntSushi/toml"

	"github.com/crosstalk-go/crosstalk/envelope"
	"github.com/crosstalk-go/crosstalk/gateway"
	"github.com/crosstalk-go/crosstalk/gateway/api"
	"github.com/crosstalk-go/crosstalk/gateway/attention"
	"github.com/crosstalk-go/crosstalk/gateway/server"
)

// Config is the relay's configuration file (TOML), documented field by
// field in docs/configuration.md. Flags override it.
type Config struct {
	// Listen is the API's address. Without tokens it must be loopback.
	Listen string `toml:"listen"`
	// DataDir holds the ledger (ledger.db) and the minted tokens; the
	// trust store only when the user config directory is unknown
	// (trustFile).
	DataDir string `toml:"data_dir"`
	// Ledger selects the store: "sqlite" (default, DataDir/ledger.db) or
	// a NATS URL list ("nats://n1:4222,nats://n2:4222") for a JetStream
	// ledger shared by several relays.
	Ledger string `toml:"ledger"`
	// LedgerStream and LedgerReplicas configure the JetStream stream
	// (defaults CROSSTALK and 1; use 3 in a cluster).
	LedgerStream   string `toml:"ledger_stream"`
	LedgerReplicas int    `toml:"ledger_replicas"`
	// Name is the sender of the relay's receipts and errors.
	Name string `toml:"name"`
	// Hosts are extra Host header names the API accepts (besides
	// localhost, 127.0.0.1 and [::1] with the listen port).
	Hosts []string `toml:"hosts"`
	// TrustedProxies are reverse proxies (addresses or CIDR prefixes)
	// whose X-Forwarded-For names the caller where the relay counts
	// callers by address.
	TrustedProxies []string `toml:"trusted_proxies"`
	// TrustFile is the TOFU trust store; by default the one crosstalk
	// verify uses (trustFile).
	TrustFile string `toml:"trust_file"`
	// RequireSignatures rejects envelopes that are not verified.
	RequireSignatures bool `toml:"require_signatures"`
	// RateLimit and RateBurst limit requests per principal.
	RateLimit float64 `toml:"rate_limit"`
	RateBurst int     `toml:"rate_burst"`
	// ClaimTTL is how long a claim lasts, e.g. "10m".
	ClaimTTL duration `toml:"claim_ttl"`
	// MaxBody bounds one intake in bytes, MaxEnvelopes its envelopes
	// (gateway.Options).
	MaxBody      int `toml:"max_body"`
	MaxEnvelopes int `toml:"max_envelopes"`
	// StreamLimit bounds the open streams of one principal, MaxStreams
	// those of the relay (api.Options).
	StreamLimit int `toml:"stream_limit"`
	MaxStreams  int `toml:"max_streams"`
	// ReadHeaderTimeout, ReadTimeout and IdleTimeout are the HTTP
	// connection deadlines (api.Timeouts).
	ReadHeaderTimeout duration `toml:"read_header_timeout"`
	ReadTimeout       duration `toml:"read_timeout"`
	IdleTimeout       duration `toml:"idle_timeout"`
	// Groups maps envelope contexts to ledger groups.
	Groups map[string]string `toml:"groups"`
	// Tokens are the API's bearer tokens.
	Tokens []TokenConfig `toml:"tokens"`
	// Admins are the token principals that may re-pin and revoke keys on
	// the web inbox's trust page (without tokens the local user may).
	Admins []string `toml:"admins"`
	// SecureCookies marks the web inbox's session cookie Secure even over
	// plain HTTP, for a relay behind a TLS-terminating proxy.
	SecureCookies bool `toml:"secure_cookies"`
	// Agents is the address book.
	Agents []AgentConfig `toml:"agents"`
	// Folder, Clipboard and Mail configure the transports beyond HTTP
	// (docs/transports.md).
	Folder    FolderConfig    `toml:"folder"`
	Clipboard ClipboardConfig `toml:"clipboard"`
	Mail      *MailConfig     `toml:"mail"`
	// Liveness sets the agents' liveness thresholds (docs/agents.md
	// "Liveness").
	Liveness LivenessConfig `toml:"liveness"`
	// LogLevel is debug, info, warn or error.
	LogLevel string `toml:"log_level"`
	// User is the user: line `crosstalk new` and `reply` write when
	// --user is not given (default: the OS user).
	User string `toml:"user"`
	// DNSServer is the "host:port" of the DNS server the relay asks for
	// signing keys published in TXT records; empty: the system resolver;
	// "none": no DNS lookups.
	DNSServer string `toml:"dns_server"`
	// ShutdownTimeout bounds a graceful shutdown (SIGTERM, SIGINT), e.g.
	// "15s": draining requests, stopping transports, closing the ledger.
	ShutdownTimeout duration `toml:"shutdown_timeout"`
	// Obligations configures the returns and escalation of undischarged
	// obligations (docs/agents.md "Returns and escalation").
	Obligations ObligationsConfig `toml:"obligations"`
}

// LivenessConfig is the [liveness] table: an agent is stale StaleAfter
// after its last sighting and evicted at twice that (BeadBoard §4.1).
type LivenessConfig struct {
	StaleAfter duration `toml:"stale_after"`
}

// ObligationsConfig is the `[obligations]` table (gateway.ReturnsOptions).
type ObligationsConfig struct {
	// ReturnInterval is the flat time between two returns, e.g. "15m".
	ReturnInterval duration `toml:"return_interval"`
	// Returns is how many times an obligation returns to its addressees
	// before it escalates; 0 turns returns and escalation off.
	Returns int `toml:"returns"`
	// CoordinatorRole is the address book role escalated to first.
	CoordinatorRole string `toml:"coordinator_role"`
	// Human is the actor id of the last rung; empty: none.
	Human string `toml:"human"`
}

// maxReturns bounds obligations.returns.
const maxReturns = 100

// DNSServerNone is the dns_server value that turns DNS key lookups off.
const DNSServerNone = server.DNSServerNone

// TokenConfig maps a bearer token to a principal. Token or TokenFile.
type TokenConfig struct {
	Token     string `toml:"token"`
	TokenFile string `toml:"token_file"`
	Principal string `toml:"principal"`
}

// AgentConfig is one address book entry (gateway.Agent).
type AgentConfig struct {
	ID        string   `toml:"id"`
	Names     []string `toml:"names"`
	Roles     []string `toml:"roles"`
	Keys      []string `toml:"keys"`
	Transport string   `toml:"transport"`
	Address   string   `toml:"address"`
	// A2A serves an A2A agent card and endpoint for this agent
	// (docs/agents.md, "A2A").
	A2A bool `toml:"a2a"`
	// SigningKey is a private key file the relay signs this agent's
	// POST /v1/send envelopes with.
	SigningKey string `toml:"signing_key"`
	// Compat "v1.0" makes the relay deliver envelopes to this agent in
	// the v1.0 form (docs/format.md); empty or "v1.1": as received.
	Compat string `toml:"compat"`
	// Buffer merges the agent's consecutive buffered deliveries from one
	// sender (docs/agents.md, "Buffered and digest delivery"); setting
	// BufferQuiet or BufferMax turns it on too. Defaults 3s and 30s.
	Buffer      bool     `toml:"buffer"`
	BufferQuiet duration `toml:"buffer_quiet"`
	BufferMax   duration `toml:"buffer_max"`
	// DigestEvery summarises the agent's digest deliveries in one digest
	// event per group every interval (at least 1m) instead of each.
	DigestEvery duration `toml:"digest_every"`
}

// DefaultListen is the relay's default address.
const DefaultListen = server.DefaultListen

// DefaultConfig returns the configuration used when no file is given.
func DefaultConfig() Config {
	return Config{
		Listen:    DefaultListen,
		DataDir:   defaultDataDir(),
		Ledger:    "sqlite",
		Name:      "SYSTEM",
		RateLimit: 500,
		RateBurst: 1000,
		ClaimTTL:  duration(gateway.DefaultClaimTTL),
		LogLevel:  "info",
		Liveness:  LivenessConfig{StaleAfter: duration(attention.StaleAfter)},

		MaxBody:           gateway.MaxIntake,
		MaxEnvelopes:      gateway.DefaultMaxEnvelopes,
		StreamLimit:       api.DefaultStreamLimit,
		MaxStreams:        api.DefaultMaxStreams,
		ReadHeaderTimeout: duration(api.DefaultReadHeaderTimeout),
		ReadTimeout:       duration(api.DefaultReadTimeout),
		IdleTimeout:       duration(api.DefaultIdleTimeout),
		ShutdownTimeout:   duration(defaultShutdownTimeout),
		Obligations: ObligationsConfig{
			ReturnInterval:  duration(gateway.DefaultReturnInterval),
			Returns:         gateway.DefaultReturns,
			CoordinatorRole: gateway.DefaultCoordinatorRole,
		},
	}
}

// defaultShutdownTimeout is the default shutdown_timeout: well within
// systemd's default TimeoutStopSec (90 s) and launchd's ExitTimeOut (20 s).
const defaultShutdownTimeout = server.DefaultShutdownTimeout

// defaultDataDir is $XDG_DATA_HOME/crosstalk, ~/.local/share/crosstalk, or
// the platform's equivalent.
func defaultDataDir() string {
	if d := os.Getenv("XDG_DATA_HOME"); d != "" {
		return filepath.Join(d, "crosstalk")
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "crosstalk-data"
	}
	switch runtime.GOOS {
	case "darwin":
		return filepath.Join(home, "Library", "Application Support", "crosstalk")
	case "windows":
		if d, err := os.UserConfigDir(); err == nil {
			return filepath.Join(d, "crosstalk")
		}
	}
	return filepath.Join(home, ".local", "share", "crosstalk")
}

// LoadConfig reads a TOML file over the defaults. Unknown keys are errors,
// so a typo does not pass silently.
func LoadConfig(path string) (Config, error) {
	if path == "" {
		return DefaultConfig(), nil
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return DefaultConfig(), fmt.Errorf("config %s: %w", path, err)
	}
	return decodeConfig(path, data)
}

// decodeConfig decodes the TOML data of the file path over the defaults
// (see LoadConfig).
func decodeConfig(path string, data []byte) (Config, error) {
	c := DefaultConfig()
	md, err := toml.Decode(string(data), &c)
	if err != nil {
		return c, fmt.Errorf("config %s: %w", path, err)
	}
	if und := md.Undecoded(); len(und) > 0 {
		keys := make([]string, len(und))
		for i, k := range und {
			keys[i] = k.String()
		}
		return c, fmt.Errorf("config %s: unknown keys: %s", path, strings.Join(keys, ", "))
	}
	return c, nil
}

// Validate checks the configuration and names the field at fault.
func (c *Config) Validate() error {
	var errs []error
	host, _, err := net.SplitHostPort(c.Listen)
	if err != nil {
		errs = append(errs, fmt.Errorf("listen: %q is not host:port", c.Listen))
	}
	tokens, err := c.tokens()
	if err != nil {
		errs = append(errs, err)
	}
	if len(tokens) == 0 && err == nil && !server.IsLoopback(host) {
		errs = append(errs, fmt.Errorf("listen: %q is not loopback; without [[tokens]] the relay listens on loopback only", c.Listen))
	}
	if c.DataDir == "" {
		errs = append(errs, errors.New("data_dir: empty"))
	}
	if c.Ledger != "sqlite" && !strings.HasPrefix(c.Ledger, "nats://") && !strings.HasPrefix(c.Ledger, "tls://") {
		errs = append(errs, fmt.Errorf("ledger: %q is neither sqlite nor a nats:// URL", c.Ledger))
	}
	if c.LedgerReplicas < 0 || c.LedgerReplicas > 5 {
		errs = append(errs, fmt.Errorf("ledger_replicas: %d is not 0-5", c.LedgerReplicas))
	}
	if _, err := c.trustedProxies(); err != nil {
		errs = append(errs, err)
	}
	if c.RateLimit < 0 || c.RateBurst < 0 {
		errs = append(errs, errors.New("rate_limit, rate_burst: must not be negative"))
	}
	if c.ClaimTTL < 0 {
		errs = append(errs, errors.New("claim_ttl: must not be negative"))
	}
	// DefaultConfig sets 15m before decoding, so a 0 here was written.
	if s := time.Duration(c.Liveness.StaleAfter); s < time.Second || s > 7*24*time.Hour {
		errs = append(errs, fmt.Errorf("liveness.stale_after: %v is not between 1s and 168h", s))
	}
	for _, b := range []struct {
		key string
		n   int64
	}{
		{"max_body", int64(c.MaxBody)}, {"max_envelopes", int64(c.MaxEnvelopes)},
		{"stream_limit", int64(c.StreamLimit)}, {"max_streams", int64(c.MaxStreams)},
		{"read_header_timeout", int64(c.ReadHeaderTimeout)}, {"read_timeout", int64(c.ReadTimeout)},
		{"idle_timeout", int64(c.IdleTimeout)},
	} {
		if b.n <= 0 {
			errs = append(errs, fmt.Errorf("%s: must be positive", b.key))
		}
	}
	if c.StreamLimit > c.MaxStreams {
		errs = append(errs, fmt.Errorf("stream_limit: %d is more than max_streams %d", c.StreamLimit, c.MaxStreams))
	}
	if c.ShutdownTimeout < 0 {
		errs = append(errs, errors.New("shutdown_timeout: must not be negative"))
	}
	if _, err := c.book(); err != nil {
		errs = append(errs, fmt.Errorf("agents: %w", err))
	}
	if err := c.validateTransports(); err != nil {
		errs = append(errs, err)
	}
	if c.DNSServer != "" && c.DNSServer != DNSServerNone {
		if _, _, err := net.SplitHostPort(c.DNSServer); err != nil {
			errs = append(errs, fmt.Errorf("dns_server: %q is not host:port (or none)", c.DNSServer))
		}
	}
	if err := c.Obligations.validate(); err != nil {
		errs = append(errs, err)
	}
	if strings.ContainsAny(c.User, "\r\n") {
		errs = append(errs, errors.New("user: contains a line break"))
	}
	switch c.LogLevel {
	case "debug", "info", "warn", "error":
	default:
		errs = append(errs, fmt.Errorf("log_level: %q is not debug, info, warn or error", c.LogLevel))
	}
	return errors.Join(errs...)
}

// validate checks the `[obligations]` table.
func (o ObligationsConfig) validate() error {
	var errs []error
	if o.Returns < 0 || o.Returns > maxReturns {
		errs = append(errs, fmt.Errorf("obligations.returns: %d is not 0-%d (0 turns returns off)", o.Returns, maxReturns))
	}
	if o.ReturnInterval < duration(time.Minute) {
		errs = append(errs, fmt.Errorf("obligations.return_interval: %s is shorter than 1m", time.Duration(o.ReturnInterval)))
	}
	if _, err := envelope.NormalizeIdentifier(o.CoordinatorRole); err != nil || o.CoordinatorRole == "" ||
		strings.ContainsFunc(o.CoordinatorRole, unicode.IsSpace) || strings.HasPrefix(o.CoordinatorRole, "@") {
		errs = append(errs, fmt.Errorf("obligations.coordinator_role: %q is not a role name (no spaces, no @, no invisible characters)", o.CoordinatorRole))
	}
	if _, err := envelope.NormalizeIdentifier(o.Human); err != nil || strings.ContainsFunc(o.Human, unicode.IsSpace) {
		errs = append(errs, fmt.Errorf("obligations.human: %q is not an actor id (no spaces, no invisible characters)", o.Human))
	}
	return errors.Join(errs...)
}

// returns is the gateway's view of the table.
func (o ObligationsConfig) returns() *gateway.ReturnsOptions {
	// In NFC, the form the address book keeps ids and roles in.
	role, _ := envelope.NormalizeIdentifier(o.CoordinatorRole)
	human, _ := envelope.NormalizeIdentifier(o.Human)
	return &gateway.ReturnsOptions{Interval: time.Duration(o.ReturnInterval), Returns: o.Returns, CoordinatorRole: role, Human: human}
}

// tokens reads the configured tokens (from files where given).
func (c *Config) tokens() (map[string]string, error) {
	out := map[string]string{}
	for i, t := range c.Tokens {
		tok := t.Token
		if t.TokenFile != "" {
			b, err := os.ReadFile(t.TokenFile)
			if err != nil {
				return nil, fmt.Errorf("tokens[%d].token_file: %w", i, err)
			}
			tok = strings.TrimSpace(string(b))
		}
		switch {
		case tok == "":
			return nil, fmt.Errorf("tokens[%d]: empty token", i)
		case len(tok) < 16:
			return nil, fmt.Errorf("tokens[%d]: token shorter than 16 characters", i)
		case t.Principal == "":
			return nil, fmt.Errorf("tokens[%d]: no principal", i)
		}
		if _, dup := out[tok]; dup {
			return nil, fmt.Errorf("tokens[%d]: token used twice", i)
		}
		out[tok] = t.Principal
	}
	return out, nil
}

func (c *Config) book() (*gateway.AddressBook, error) {
	agents := make([]gateway.Agent, len(c.Agents))
	for i, a := range c.Agents {
		agents[i] = a.agent()
	}
	return gateway.NewAddressBook(agents)
}

// agent is the address book entry a configures.
func (a AgentConfig) agent() gateway.Agent {
	g := gateway.Agent{ID: a.ID, Names: a.Names, Roles: a.Roles, Keys: a.Keys, Transport: a.Transport, Address: a.Address, Compat: a.Compat, A2A: a.A2A,
		DigestEvery: time.Duration(a.DigestEvery)}
	if a.Buffer || a.BufferQuiet != 0 || a.BufferMax != 0 {
		g.Buffer = &attention.Buffer{Quiet: time.Duration(a.BufferQuiet), MaxWindow: time.Duration(a.BufferMax)}
	}
	return g
}

// trustFile is the configured trust store, or the one `crosstalk verify`
// and `crosstalk trust` use by default, so that keys pinned by hand are the
// keys the relay trusts.
// trustedProxies parses trusted_proxies: addresses (one host) or CIDR
// prefixes.
func (c *Config) trustedProxies() ([]netip.Prefix, error) {
	var ps []netip.Prefix
	for _, v := range c.TrustedProxies {
		p, err := netip.ParsePrefix(v)
		if err != nil {
			a, aerr := netip.ParseAddr(v)
			if aerr != nil || a.Zone() != "" {
				return nil, fmt.Errorf("trusted_proxies: %q is neither an address nor a CIDR prefix", v)
			}
			p = netip.PrefixFrom(a.Unmap(), a.Unmap().BitLen())
		}
		ps = append(ps, p.Masked())
	}
	return ps, nil
}

func (c *Config) trustFile() string {
	if c.TrustFile != "" {
		return c.TrustFile
	}
	if f := defaultTrustFile(); f != "" {
		return f
	}
	return filepath.Join(c.DataDir, "known_keys")
}

// duration is a time.Duration written as "10m" in TOML.
type duration time.Duration

// UnmarshalText parses a Go duration string.
func (d *duration) UnmarshalText(b []byte) error {
	v, err := time.ParseDuration(string(b))
	if err != nil {
		return err
	}
	*d = duration(v)
	return nil
}

// MarshalText writes the duration as a Go duration string.
func (d duration) MarshalText() ([]byte, error) { return []byte(time.Duration(d).String()), nil }
