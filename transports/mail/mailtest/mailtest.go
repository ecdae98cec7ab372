// Package mailtest starts a throwaway mail system on loopback for tests:
// a real Dovecot (IMAP with STARTTLS and implicit TLS, LMTP, SMTP
// submission with STARTTLS or implicit TLS, and AUTH) and a real Postfix that delivers into Dovecot over LMTP. It
// runs both from a configuration of its own: every file lives in a temp directory, every port is a free
// 127.0.0.1 port, and Close stops both servers by their own process ids.
//
// Any user name at Domain exists, with the password Password, so each test
// takes its own fresh mailbox from NewUser.
//
// It needs root (Dovecot drops privileges to its system users and to
// uid 65534 for the mail files; Postfix's master starts as root) and the
// Debian packages dovecot-imapd, dovecot-lmtpd, dovecot-submissiond and
// postfix. Require skips a test when they are missing, or fails it when
// the environment variable CI is "true".
package mailtest

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	mrand "math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/emersion/go-imap/v2"
	"github.com/emersion/go-imap/v2/imapclient"
	"github.com/emersion/go-smtp"
)

// Domain is the mail domain every test user lives in.
const Domain = "example.test"

// Password is every user's password.
const Password = "secret"

// mailUID is the owner of the mail files: Dovecot refuses uid 0.
const mailUID, mailGID = 65534, 65534

// Packages lists the Debian packages the stack needs.
var Packages = []string{"dovecot-imapd", "dovecot-lmtpd", "dovecot-submissiond", "postfix"}

// binaries the stack runs, with the package providing each.
var binaries = map[string]string{
	"dovecot": "dovecot-imapd",
	"postfix": "postfix",
}

// Available reports why the stack cannot run here, or nil.
func Available() error {
	var missing []string
	for bin, pkg := range binaries {
		if _, err := lookPath(bin); err != nil {
			missing = append(missing, pkg)
		}
	}
	for _, f := range []string{"/usr/lib/dovecot/lmtp", "/usr/lib/dovecot/submission"} {
		if _, err := os.Stat(f); err != nil {
			missing = append(missing, "dovecot-lmtpd", "dovecot-submissiond")
			break
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("mailtest: missing packages; install with: apt-get install -y --no-install-recommends %s", strings.Join(Packages, " "))
	}
	if os.Geteuid() != 0 {
		return errors.New("mailtest: the Dovecot + Postfix test stack must be started as root")
	}
	return nil
}

// lookPath finds a binary on PATH or in the sbin directories, which a
// non-login root shell may lack on PATH.
func lookPath(bin string) (string, error) {
	if p, err := exec.LookPath(bin); err == nil {
		return p, nil
	}
	for _, dir := range []string{"/usr/sbin", "/sbin", "/usr/local/sbin"} {
		p := filepath.Join(dir, bin)
		if fi, err := os.Stat(p); err == nil && !fi.IsDir() {
			return p, nil
		}
	}
	return "", fmt.Errorf("mailtest: %s not found", bin)
}

// Require skips t when the stack cannot run here, or fails it when CI is
// "true" (the real-server tests must never be skipped in CI).
func Require(t testing.TB) {
	t.Helper()
	if err := Available(); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("%v (CI=true: real-server tests may not be skipped)", err)
		}
		t.Skip(err)
	}
}

// Stack is a running Dovecot + Postfix pair.
type Stack struct {
	// Dir holds every file of the stack.
	Dir string
	// IMAPAddr is Dovecot IMAP (plaintext, STARTTLS offered).
	IMAPAddr string
	// LMTPAddr is Dovecot LMTP, which delivers into the mailboxes.
	LMTPAddr string
	// SubmissionAddr is Dovecot submission: SMTP with STARTTLS and AUTH
	// PLAIN/LOGIN (any user, Password), relaying to Postfix.
	SubmissionAddr string
	// SMTPAddr is Postfix: SMTP without AUTH, trusting 127.0.0.0/8,
	// delivering @Domain over LMTP and refusing every other domain.
	SMTPAddr string
	// IMAPSAddr and SubmissionsAddr are Dovecot IMAP and submission with
	// implicit TLS (the roles of ports 993 and 465).
	IMAPSAddr, SubmissionsAddr string
	// CertPEM is the self-signed certificate (CN and SAN localhost,
	// 127.0.0.1) both servers present.
	CertPEM []byte

	dovecot     *exec.Cmd
	dovecotDone chan struct{} // closed when the master has exited
	postfix     string        // config dir
	users       atomic.Int64
	watchdog    *exec.Cmd     // stops Postfix if the test binary dies
	spawns      chan spawnReq // to the locked thread that starts children
	release     chan struct{} // ends that thread
	stopOnce    sync.Once
	stopErr     error
}

// Start starts the stack. Close stops it. A start that fails (a port
// taken meanwhile by another program) is retried with new ports, twice.
func Start(ctx context.Context) (*Stack, error) {
	if err := Available(); err != nil {
		return nil, err
	}
	var errs []error
	for attempt := 0; attempt < 3; attempt++ {
		s, err := start(ctx)
		if err == nil {
			return s, nil
		}
		errs = append(errs, err)
		if ctx.Err() != nil {
			break
		}
	}
	return nil, errors.Join(errs...)
}

func start(ctx context.Context) (s *Stack, err error) {
	dir, err := os.MkdirTemp("", "crosstalk-mailtest-")
	if err != nil {
		return nil, fmt.Errorf("mailtest: %w", err)
	}
	s = &Stack{Dir: dir}
	defer func() {
		if err != nil {
			logs := s.Logs()
			s.Close()
			err = fmt.Errorf("%w\n%s", err, logs)
		}
	}()
	// Dovecot's unprivileged processes must traverse the directory.
	if err := os.Chmod(dir, 0o755); err != nil {
		return nil, fmt.Errorf("mailtest: %w", err)
	}
	ports, err := freePorts(6)
	if err != nil {
		return nil, err
	}
	s.IMAPAddr = "127.0.0.1:" + strconv.Itoa(ports[0])
	s.LMTPAddr = "127.0.0.1:" + strconv.Itoa(ports[1])
	s.SubmissionAddr = "127.0.0.1:" + strconv.Itoa(ports[2])
	s.SMTPAddr = "127.0.0.1:" + strconv.Itoa(ports[3])
	s.IMAPSAddr = "127.0.0.1:" + strconv.Itoa(ports[4])
	s.SubmissionsAddr = "127.0.0.1:" + strconv.Itoa(ports[5])
	if err := s.writeCert(); err != nil {
		return nil, err
	}
	if err := s.startDovecot(ports); err != nil {
		return nil, err
	}
	if err := s.startPostfix(ctx, ports); err != nil {
		return nil, err
	}
	for _, a := range []string{s.IMAPAddr, s.LMTPAddr, s.SubmissionAddr, s.SMTPAddr, s.IMAPSAddr, s.SubmissionsAddr} {
		if err := s.waitPort(ctx, a, 20*time.Second); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// StartT starts a stack for one test and stops it when the test ends. It
// skips or fails the test as Require does.
func StartT(t testing.TB) *Stack {
	t.Helper()
	Require(t)
	s, err := Start(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("mailtest: stopping: %v", err)
		}
	})
	return s
}

type spawnReq struct {
	cmd *exec.Cmd
	err chan error
}

// spawn starts cmd from one OS thread that stays locked and alive until
// Close: a child's Pdeathsig fires when the thread that started it ends,
// which for an unlocked goroutine can happen at any time.
func (s *Stack) spawn(cmd *exec.Cmd) error {
	if s.spawns == nil {
		s.spawns = make(chan spawnReq)
		s.release = make(chan struct{})
		go func() {
			runtime.LockOSThread()
			for {
				select {
				case r := <-s.spawns:
					r.err <- r.cmd.Start()
				case <-s.release:
					return // with the thread locked: the thread ends
				}
			}
		}()
	}
	r := spawnReq{cmd, make(chan error, 1)}
	s.spawns <- r
	return <-r.err
}

// freePorts picks n ports that are free now, below the kernel's
// ephemeral range: outgoing connections (of this or any other test) never
// take those, so only another explicit listener could grab one before the
// servers bind it.
func freePorts(n int) ([]int, error) {
	hi := 32768
	if b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range"); err == nil {
		if f := strings.Fields(string(b)); len(f) == 2 {
			if v, err := strconv.Atoi(f[0]); err == nil && v > 12000 {
				hi = v
			}
		}
	}
	lo := 10000
	var ports []int
	var lns []net.Listener
	defer func() {
		for _, ln := range lns {
			ln.Close()
		}
	}()
	for tries := 0; len(ports) < n && tries < 1000; tries++ {
		p := lo + mrand.IntN(hi-lo)
		if slices.Contains(ports, p) {
			continue
		}
		ln, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p))
		if err != nil {
			continue
		}
		lns = append(lns, ln)
		ports = append(ports, p)
	}
	if len(ports) < n {
		return nil, errors.New("mailtest: no free ports")
	}
	return ports, nil
}

// waitPort waits until addr accepts connections; it gives up early when
// Dovecot has exited (a port it could not bind).
func (s *Stack) waitPort(ctx context.Context, addr string, d time.Duration) error {
	deadline := time.Now().Add(d)
	for {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.Close()
			return nil
		}
		select {
		case <-s.dovecotDone:
			return fmt.Errorf("mailtest: dovecot exited while starting (%v)", s.dovecot.ProcessState)
		default:
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("mailtest: %s not listening after %v: %w", addr, d, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// writeCert makes a self-signed ECDSA certificate for localhost.
func (s *Stack) writeCert() error {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return fmt.Errorf("mailtest: %w", err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(time.Now().UnixNano()),
		Subject:               pkix.Name{CommonName: "localhost"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(48 * time.Hour),
		DNSNames:              []string{"localhost"},
		IPAddresses:           []net.IP{net.IPv4(127, 0, 0, 1)},
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return fmt.Errorf("mailtest: %w", err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return fmt.Errorf("mailtest: %w", err)
	}
	s.CertPEM = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	if err := os.WriteFile(filepath.Join(s.Dir, "cert.pem"), s.CertPEM, 0o644); err != nil {
		return fmt.Errorf("mailtest: %w", err)
	}
	kpem := pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder})
	if err := os.WriteFile(filepath.Join(s.Dir, "key.pem"), kpem, 0o600); err != nil {
		return fmt.Errorf("mailtest: %w", err)
	}
	return nil
}

// TLSConfig trusts the stack's certificate for the name "localhost".
func (s *Stack) TLSConfig() *tls.Config {
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(s.CertPEM)
	return &tls.Config{RootCAs: pool, ServerName: "localhost", MinVersion: tls.VersionTLS12}
}

const dovecotConf = `# crosstalk mailtest: Dovecot 2.3 on loopback, everything in {{DIR}}
instance_name = crosstalk-mailtest-{{ID}}
base_dir = {{DIR}}/dovecot/run
state_dir = {{DIR}}/dovecot/state
listen = 127.0.0.1
protocols = imap lmtp submission
log_path = {{DIR}}/dovecot.log
hostname = localhost
ssl = yes
ssl_cert = <{{DIR}}/cert.pem
ssl_key = <{{DIR}}/key.pem
ssl_dh = </usr/share/dovecot/dh.pem
disable_plaintext_auth = no
auth_mechanisms = plain login
# Refuse wrong passwords at once (the default waits 2 s).
auth_failure_delay = 0
# "u1" over IMAP and "u1@example.test" over LMTP are the same user.
auth_username_format = %Ln
mail_location = maildir:~/Maildir
first_valid_uid = 100
# Any user exists, with one password: each test takes a fresh mailbox.
passdb {
  driver = static
  args = password={{PASSWORD}}
}
userdb {
  driver = static
  args = uid={{UID}} gid={{GID}} home={{DIR}}/mail/%n
}
namespace inbox {
  inbox = yes
  separator = /
}
# No growing delays for an IP after failed logins: tests try wrong
# passwords on purpose.
service anvil {
  unix_listener anvil-auth-penalty {
    mode = 0
  }
}
service imap-login {
  inet_listener imap {
    address = 127.0.0.1
    port = {{IMAP}}
  }
  inet_listener imaps {
    address = 127.0.0.1
    port = {{IMAPS}}
    ssl = yes
  }
}
service lmtp {
  inet_listener lmtp {
    address = 127.0.0.1
    port = {{LMTP}}
  }
}
service submission-login {
  inet_listener submission {
    address = 127.0.0.1
    port = {{SUBM}}
  }
  inet_listener submissions {
    address = 127.0.0.1
    port = {{SUBMS}}
    ssl = yes
  }
}
submission_relay_host = 127.0.0.1
submission_relay_port = {{SMTP}}
submission_relay_trusted = yes
protocol lmtp {
  postmaster_address = postmaster@example.test
}
`

func expand(tmpl string, vars map[string]string) string {
	for k, v := range vars {
		tmpl = strings.ReplaceAll(tmpl, "{{"+k+"}}", v)
	}
	return tmpl
}

func (s *Stack) vars(ports []int) map[string]string {
	return map[string]string{
		"DIR":      s.Dir,
		"ID":       filepath.Base(s.Dir),
		"PASSWORD": Password,
		"UID":      strconv.Itoa(mailUID),
		"GID":      strconv.Itoa(mailGID),
		"IMAP":     strconv.Itoa(ports[0]),
		"LMTP":     strconv.Itoa(ports[1]),
		"SUBM":     strconv.Itoa(ports[2]),
		"SMTP":     strconv.Itoa(ports[3]),
		"IMAPS":    strconv.Itoa(ports[4]),
		"SUBMS":    strconv.Itoa(ports[5]),
	}
}

func (s *Stack) startDovecot(ports []int) error {
	for _, d := range []string{"dovecot/run", "dovecot/state", "mail"} {
		if err := os.MkdirAll(filepath.Join(s.Dir, d), 0o755); err != nil {
			return fmt.Errorf("mailtest: %w", err)
		}
	}
	if err := os.Chown(filepath.Join(s.Dir, "mail"), mailUID, mailGID); err != nil {
		return fmt.Errorf("mailtest: %w", err)
	}
	conf := filepath.Join(s.Dir, "dovecot.conf")
	if err := os.WriteFile(conf, []byte(expand(dovecotConf, s.vars(ports))), 0o644); err != nil {
		return fmt.Errorf("mailtest: %w", err)
	}
	bin, err := lookPath("dovecot")
	if err != nil {
		return err
	}
	out, err := os.Create(filepath.Join(s.Dir, "dovecot.stderr"))
	if err != nil {
		return fmt.Errorf("mailtest: %w", err)
	}
	defer out.Close()
	// In the foreground (-F) and in its own process group, so Close can
	// stop the master and all its children at once by that group's id
	// (the recipe's fast stop; SIGTERM takes Dovecot 1-2.6 s).
	cmd := exec.Command(bin, "-F", "-c", conf)
	cmd.Stdout, cmd.Stderr = out, out
	// Pdeathsig: if the test binary dies without Close (a timeout panic),
	// the kernel kills the master, and its children follow it.
	cmd.SysProcAttr = groupAttr(true)
	if err := s.spawn(cmd); err != nil {
		return fmt.Errorf("mailtest: starting dovecot: %w", err)
	}
	s.dovecotDone = make(chan struct{})
	go func() { cmd.Wait(); close(s.dovecotDone) }()
	s.dovecot = cmd
	return nil
}

const postfixMain = `# crosstalk mailtest: Postfix on loopback, everything in {{DIR}}/postfix
compatibility_level = 3.6
queue_directory = {{DIR}}/postfix/spool
data_directory = {{DIR}}/postfix/data
maillog_file_prefixes = {{DIR}}/postfix
maillog_file = {{DIR}}/postfix/postfix.log
mail_owner = postfix
setgid_group = postdrop
myhostname = localhost
mydomain = example.test
myorigin = $mydomain
inet_interfaces = 127.0.0.1
inet_protocols = ipv4
mynetworks = 127.0.0.0/8
mydestination =
local_recipient_maps =
alias_maps =
alias_database =
relayhost =
virtual_mailbox_domains = example.test
virtual_transport = lmtp:inet:127.0.0.1:{{LMTP}}
default_transport = error:outbound mail disabled in test instance
smtp_dns_support_level = disabled
smtpd_relay_restrictions = permit_mynetworks, reject_unauth_destination
smtpd_banner = $myhostname ESMTP test
biff = no
queue_run_delay = 1s
minimal_backoff_time = 1s
maximal_backoff_time = 2s
`

// Nothing chrooted: Debian's stock master.cf chroots into the queue dir,
// which lacks the /etc files.
const postfixMaster = `127.0.0.1:{{SMTP}} inet n - n - - smtpd
pickup     unix  n - n 60 1 pickup
cleanup    unix  n - n -  0 cleanup
qmgr       unix  n - n 300 1 qmgr
rewrite    unix  - - n -  - trivial-rewrite
bounce     unix  - - n -  0 bounce
defer      unix  - - n -  0 bounce
trace      unix  - - n -  0 bounce
verify     unix  - - n -  1 verify
flush      unix  n - n 1000? 0 flush
proxymap   unix  - - n -  - proxymap
proxywrite unix  - - n -  1 proxymap
showq      unix  n - n -  - showq
error      unix  - - n -  - error
retry      unix  - - n -  - error
discard    unix  - - n -  - discard
lmtp       unix  - - n -  - lmtp
anvil      unix  - - n -  1 anvil
scache     unix  - - n -  1 scache
postlog    unix-dgram n - n - 1 postlogd
`

func (s *Stack) startPostfix(ctx context.Context, ports []int) error {
	p := filepath.Join(s.Dir, "postfix")
	for _, d := range []string{"etc", "spool", "data"} {
		if err := os.MkdirAll(filepath.Join(p, d), 0o755); err != nil {
			return fmt.Errorf("mailtest: %w", err)
		}
	}
	v := s.vars(ports)
	if err := os.WriteFile(filepath.Join(p, "etc", "main.cf"), []byte(expand(postfixMain, v)), 0o644); err != nil {
		return fmt.Errorf("mailtest: %w", err)
	}
	if err := os.WriteFile(filepath.Join(p, "etc", "master.cf"), []byte(expand(postfixMaster, v)), 0o644); err != nil {
		return fmt.Errorf("mailtest: %w", err)
	}
	cmd := exec.CommandContext(ctx, "chown", "postfix", filepath.Join(p, "data"))
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("mailtest: chown postfix: %v: %s", err, out)
	}
	bin, err := lookPath("postfix")
	if err != nil {
		return err
	}
	// postfix start daemonizes; the master's pid lands in
	// spool/pid/master.pid. Stdio is detached so nothing waits on it.
	cmd = exec.CommandContext(ctx, bin, "-c", filepath.Join(p, "etc"), "start")
	cmd.Stdin, cmd.Stdout, cmd.Stderr = nil, nil, nil
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("mailtest: postfix start: %w (debug with: script -qc \"postfix -c %s check\" /dev/null)", err, filepath.Join(p, "etc"))
	}
	s.postfix = filepath.Join(p, "etc")
	// Postfix daemonizes, so it cannot get a Pdeathsig; a watchdog shell
	// does, and stops it if the test binary dies without Close.
	w := exec.Command("/bin/sh", "-c", `trap 'kill $! 2>/dev/null; "$0" -c "$1" stop; exit 0' TERM; while :; do sleep 3600 & wait $!; done`, bin, s.postfix)
	w.SysProcAttr = groupAttr(false)
	if err := s.spawn(w); err != nil {
		return fmt.Errorf("mailtest: postfix watchdog: %w", err)
	}
	s.watchdog = w
	return nil
}

// Close stops both servers (by their process ids, never by name) and
// removes the directory.
func (s *Stack) Close() error {
	s.stopOnce.Do(func() {
		var errs []error
		if s.watchdog != nil {
			// Its process group: the shell and its sleep.
			killGroup(s.watchdog.Process.Pid)
			s.watchdog.Wait()
		}
		if s.postfix != "" {
			errs = append(errs, s.stopPostfix())
		}
		if s.dovecot != nil && s.dovecot.Process != nil {
			// The negative pid is Dovecot's process group: master and children.
			if err := killGroup(s.dovecot.Process.Pid); err != nil {
				errs = append(errs, fmt.Errorf("mailtest: killing dovecot: %w", err))
			}
			<-s.dovecotDone
		}
		if s.release != nil {
			close(s.release)
		}
		if err := errors.Join(errs...); err != nil {
			s.stopErr = err
			return // keep the files for a look
		}
		os.RemoveAll(s.Dir)
	})
	return s.stopErr
}

func (s *Stack) stopPostfix() error {
	pidFile := filepath.Join(s.Dir, "postfix", "spool", "pid", "master.pid")
	b, _ := os.ReadFile(pidFile)
	pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	bin, err := lookPath("postfix")
	if err == nil {
		exec.Command(bin, "-c", s.postfix, "stop").Run()
	}
	if pid <= 0 {
		return nil
	}
	deadline := time.Now().Add(5 * time.Second)
	for alive(pid) {
		if time.Now().After(deadline) {
			kill(pid)
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	return nil
}

// Logs returns the servers' log files, for failure messages.
func (s *Stack) Logs() string {
	var b strings.Builder
	for _, f := range []string{"dovecot.stderr", "dovecot.log", "postfix/postfix.log"} {
		data, err := os.ReadFile(filepath.Join(s.Dir, f))
		if err != nil || len(data) == 0 {
			continue
		}
		if len(data) > 8<<10 {
			data = data[len(data)-8<<10:]
		}
		fmt.Fprintf(&b, "--- %s\n%s", f, data)
	}
	return b.String()
}

// NewUser returns a user name with a mailbox no other caller got.
func (s *Stack) NewUser() string {
	return "u" + strconv.FormatInt(s.users.Add(1), 10)
}

// Address is user's mail address.
func Address(user string) string { return user + "@" + Domain }

// Deliver puts a raw message (CRLF line ends) into to's INBOX over LMTP,
// as an outside party's mail would arrive.
func (s *Stack) Deliver(ctx context.Context, from, to string, raw []byte) error {
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", s.LMTPAddr)
	if err != nil {
		return fmt.Errorf("mailtest: lmtp: %w", err)
	}
	c := smtp.NewClientLMTP(conn) // Dovecot LMTP only speaks LHLO
	defer c.Close()
	c.CommandTimeout = 10 * time.Second
	c.SubmissionTimeout = 10 * time.Second
	if err := c.Hello("localhost"); err != nil {
		return fmt.Errorf("mailtest: lmtp: %w", err)
	}
	if err := c.Mail(from, nil); err != nil {
		return fmt.Errorf("mailtest: lmtp: %w", err)
	}
	if err := c.Rcpt(to, nil); err != nil {
		return fmt.Errorf("mailtest: lmtp: %w", err)
	}
	w, err := c.Data()
	if err != nil {
		return fmt.Errorf("mailtest: lmtp: %w", err)
	}
	if _, err := w.Write(raw); err != nil {
		return fmt.Errorf("mailtest: lmtp: %w", err)
	}
	if _, err := w.CloseWithLMTPResponse(); err != nil {
		return fmt.Errorf("mailtest: lmtp: %w", err)
	}
	return c.Quit()
}

// Dial logs user in over IMAP (plaintext; loopback).
func (s *Stack) Dial(user string, opts *imapclient.Options) (*imapclient.Client, error) {
	c, err := imapclient.DialInsecure(s.IMAPAddr, opts)
	if err != nil {
		return nil, fmt.Errorf("mailtest: imap: %w", err)
	}
	if err := c.Login(user, Password).Wait(); err != nil {
		c.Close()
		return nil, fmt.Errorf("mailtest: imap login %s: %w", user, err)
	}
	return c, nil
}

// Message is a message in a mailbox.
type Message struct {
	UID   imap.UID
	Flags []imap.Flag
	Raw   []byte
}

// HasFlag reports whether m carries f.
func (m Message) HasFlag(f imap.Flag) bool {
	for _, g := range m.Flags {
		if strings.EqualFold(string(g), string(f)) {
			return true
		}
	}
	return false
}

// Messages returns every message in user's mailbox (INBOX when ""),
// without marking any of them \Seen.
func (s *Stack) Messages(user, mailbox string) ([]Message, error) {
	if mailbox == "" {
		mailbox = "INBOX"
	}
	c, err := s.Dial(user, nil)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	sel, err := c.Select(mailbox, &imap.SelectOptions{ReadOnly: true}).Wait()
	if err != nil {
		return nil, fmt.Errorf("mailtest: select %s: %w", mailbox, err)
	}
	if sel.NumMessages == 0 {
		c.Logout().Wait()
		return nil, nil
	}
	section := &imap.FetchItemBodySection{Peek: true}
	var all imap.SeqSet
	all.AddRange(1, 0) // 1:*
	bufs, err := c.Fetch(all, &imap.FetchOptions{UID: true, Flags: true, BodySection: []*imap.FetchItemBodySection{section}}).Collect()
	if err != nil {
		return nil, fmt.Errorf("mailtest: fetch: %w", err)
	}
	var msgs []Message
	for _, b := range bufs {
		msgs = append(msgs, Message{UID: b.UID, Flags: b.Flags, Raw: bytes.Clone(b.FindBodySection(section))})
	}
	c.Logout().Wait()
	return msgs, nil
}
