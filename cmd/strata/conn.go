package main

import (
	"bufio"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// How a client command finds and authenticates to the brokers. Every
// command that talks to a broker takes the same settings, from (first wins)
// its flags, STRATA_* environment variables, a profile file, and the
// defaults. The profile plays the part of rpk's profiles and of the Kafka
// tools' --command-config: write the brokers and credentials once and every
// command uses them.
//
// Profile format: one "key: value" per line (a flat YAML mapping; "key=value"
// is accepted too), '#' starts a comment. Keys are the flag names:
//
//	brokers: kafka-1:9093,kafka-2:9093
//	sasl-mechanism: SCRAM-SHA-512
//	sasl-username: alice
//	sasl-password-file: /home/alice/.config/strata/password
//	tls: true
//	tls-ca-file: /etc/strata/ca.pem
//
// The profile is --profile, else $STRATA_PROFILE, else
// ~/.config/strata/client.yaml when that file exists. Passwords are read
// from a file, never given on the command line or in the environment.

// connSettings are the settings, each with the environment variable that
// also sets it.
var connSettings = []struct{ flag, env string }{
	{"brokers", "STRATA_BROKERS"},
	{"sasl-mechanism", "STRATA_SASL_MECHANISM"},
	{"sasl-username", "STRATA_SASL_USERNAME"},
	{"sasl-password-file", "STRATA_SASL_PASSWORD_FILE"},
	{"tls", "STRATA_TLS"},
	{"tls-ca-file", "STRATA_TLS_CA_FILE"},
}

// connDialTimeout bounds one TCP (and TLS) connect, so an address where
// nothing listens fails in seconds rather than the OS's minutes.
const connDialTimeout = 5 * time.Second

// connFlags registers the connection flags on fs; call its methods after
// parsing.
type connFlags struct {
	fs      *flag.FlagSet
	cli     *cli
	getenv  func(string) string
	values  map[string]*string
	tls     *bool
	profile *string
}

func newConnFlags(fs *flag.FlagSet, c *cli) *connFlags {
	f := &connFlags{fs: fs, cli: c, getenv: c.getenv, values: map[string]*string{}}
	f.values["brokers"] = fs.String("brokers", defaultBrokers, "comma-separated `host:port` list of brokers to bootstrap from ($STRATA_BROKERS)")
	f.values["sasl-mechanism"] = fs.String("sasl-mechanism", "", "SASL mechanism: PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512 (empty: no SASL)")
	f.values["sasl-username"] = fs.String("sasl-username", "", "SASL user name")
	f.values["sasl-password-file"] = fs.String("sasl-password-file", "", "file holding the SASL password (first line)")
	f.tls = fs.Bool("tls", false, "connect with TLS")
	f.values["tls-ca-file"] = fs.String("tls-ca-file", "", "PEM CA bundle to verify the brokers with (implies --tls; default: the system roots)")
	f.profile = fs.String("profile", "", "client profile `file` with brokers and credentials (default $STRATA_PROFILE, else ~/.config/strata/client.yaml if present)")
	return f
}

// connConfig is the resolved connection: where to bootstrap and the kgo
// options that reach and authenticate to the brokers.
type connConfig struct {
	seeds  []string
	opts   []kgo.Opt
	secure bool // TLS or SASL
}

// resolve merges flags, environment and profile.
func (f *connFlags) resolve() (connConfig, error) {
	given := map[string]bool{}
	f.fs.Visit(func(fl *flag.Flag) { given[fl.Name] = true })
	profile, err := f.loadProfile(given["profile"])
	if err != nil {
		return connConfig{}, err
	}
	get := func(name, env string) string {
		if given[name] {
			if name == "tls" {
				return strconv.FormatBool(*f.tls)
			}
			return *f.values[name]
		}
		if v := f.env(env); v != "" {
			return v
		}
		if v, ok := profile[name]; ok {
			return v
		}
		if name == "tls" {
			return "false"
		}
		return *f.values[name]
	}
	s := map[string]string{}
	for _, cs := range connSettings {
		s[cs.flag] = get(cs.flag, cs.env)
	}
	seeds := splitList(strings.Trim(s["brokers"], "[]"))
	if len(seeds) == 0 {
		return connConfig{}, usageErrorf("--brokers is empty")
	}
	useTLS, err := strconv.ParseBool(s["tls"])
	if err != nil {
		return connConfig{}, usageErrorf("tls %q: want true or false", s["tls"])
	}
	cfg := connConfig{seeds: seeds, opts: []kgo.Opt{kgo.SeedBrokers(seeds...), kgo.DialTimeout(connDialTimeout)}}
	if useTLS || s["tls-ca-file"] != "" {
		opt, err := clientTLS(s["tls-ca-file"])
		if err != nil {
			return connConfig{}, err
		}
		cfg.opts, cfg.secure = append(cfg.opts, opt), true
	}
	if s["sasl-mechanism"] != "" {
		opt, err := clientSASL(s["sasl-mechanism"], s["sasl-username"], s["sasl-password-file"])
		if err != nil {
			return connConfig{}, err
		}
		cfg.opts, cfg.secure = append(cfg.opts, opt), true
	}
	f.cli.conn = &connSummary{seeds: seeds, tls: useTLS || s["tls-ca-file"] != "",
		saslMechanism: strings.ToUpper(s["sasl-mechanism"]), saslUser: s["sasl-username"]}
	return cfg, nil
}

func (f *connFlags) env(name string) string {
	if f.getenv == nil {
		return ""
	}
	return strings.TrimSpace(f.getenv(name))
}

// loadProfile reads the profile file, if any. An explicitly named profile
// must exist; the default one is optional.
func (f *connFlags) loadProfile(explicit bool) (map[string]string, error) {
	path := *f.profile
	if !explicit {
		path = f.env("STRATA_PROFILE")
		explicit = path != ""
	}
	if path == "" {
		home := f.env("HOME")
		if home == "" {
			return nil, nil
		}
		path = filepath.Join(home, ".config", "strata", "client.yaml")
	}
	file, err := os.Open(path)
	if err != nil {
		if !explicit && os.IsNotExist(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("client profile: %w", err)
	}
	defer file.Close()
	return parseProfile(path, file)
}

// maxProfileLine bounds one profile line.
const maxProfileLine = 64 << 10

func parseProfile(path string, file *os.File) (map[string]string, error) {
	known := map[string]bool{}
	for _, cs := range connSettings {
		known[cs.flag] = true
	}
	out := map[string]string{}
	sc := bufio.NewScanner(file)
	sc.Buffer(make([]byte, 4096), maxProfileLine)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") || line == "---" {
			continue
		}
		key, value, ok := strings.Cut(line, ":")
		if k, v, eq := strings.Cut(line, "="); eq && (!ok || len(k) < len(key)) {
			key, value, ok = k, v, true
		}
		key = strings.TrimSpace(key)
		if !ok || !known[key] {
			return nil, usageErrorf("client profile %s line %d: want one of %s as \"key: value\"", path, n, profileKeys())
		}
		value = strings.TrimSpace(value)
		if i := strings.Index(value, " #"); i >= 0 {
			value = strings.TrimSpace(value[:i])
		}
		out[key] = strings.Trim(value, `"'`)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("client profile %s: %w", path, err)
	}
	return out, nil
}

func profileKeys() string {
	var keys []string
	for _, cs := range connSettings {
		keys = append(keys, cs.flag)
	}
	return strings.Join(keys, ", ")
}

// client opens a kgo client with the connection's options and extra.
func (f *connFlags) client(extra ...kgo.Opt) (*kgo.Client, connConfig, error) {
	cfg, err := f.resolve()
	if err != nil {
		return nil, cfg, err
	}
	cl, err := kgo.NewClient(append(cfg.opts, extra...)...)
	return cl, cfg, err
}

// admin opens an admin client; call the returned function to close it.
func (f *connFlags) admin() (*kadm.Client, func(), error) {
	cl, _, err := f.client()
	if err != nil {
		return nil, nil, err
	}
	return kadm.NewClient(cl), cl.Close, nil
}
