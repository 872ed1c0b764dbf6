package main

// Security flags of `strata serve`: named listeners, TLS, SASL,
// the authorizer switch and the transport limits. Secrets come from files
// (--inter-broker-sasl-password-file, --sasl-bootstrap-users) and are
// never logged.

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"strings"

	"github.com/strata-log/strata/auth"
	"github.com/strata-log/strata/broker"
	"github.com/strata-log/strata/metadata"
)

// securityFlags are the raw security flag values.
type securityFlags struct {
	listeners             string
	advertisedListeners   string
	protocolMap           string
	interBrokerListener   string
	sslCertFile           string
	sslKeyFile            string
	sslCAFile             string
	sslClientAuth         string
	saslMechanisms        string
	interBrokerMechanism  string
	interBrokerUsername   string
	interBrokerPassFile   string
	saslBootstrapUsers    string
	superUsers            string
	authorizer            bool
	allowEveryoneIfNoACL  bool
	maxConnections        int
	maxConnectionsPerIP   int
	queuedMaxRequestBytes int64
}

func (f *securityFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.listeners, "listeners", "",
		"named listeners `NAME://host:port,...` (listeners); when set, --listen and --advertise are not used")
	fs.StringVar(&f.advertisedListeners, "advertised-listeners", "",
		"`NAME://host:port,...` given to clients and peers per listener (advertised.listeners; default: each listener's address)")
	fs.StringVar(&f.protocolMap, "listener-security-protocol-map", "",
		"`NAME:PROTOCOL,...` for listener names that are not protocols (PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL)")
	fs.StringVar(&f.interBrokerListener, "inter-broker-listener-name", "",
		"listener peers replicate through (inter.broker.listener.name; default: the first listener)")
	fs.StringVar(&f.sslCertFile, "ssl-cert-file", "", "PEM certificate (chain) of SSL and SASL_SSL listeners; also the client certificate towards peers")
	fs.StringVar(&f.sslKeyFile, "ssl-key-file", "", "PEM private key of --ssl-cert-file")
	fs.StringVar(&f.sslCAFile, "ssl-ca-file", "", "PEM CA certificates that verify client certificates and peers' server certificates")
	fs.StringVar(&f.sslClientAuth, "ssl-client-auth", "none",
		"client certificates on TLS listeners: none, requested or required (ssl.client.auth); on SSL listeners the certificate subject is the principal")
	fs.StringVar(&f.saslMechanisms, "sasl-enabled-mechanisms", "SCRAM-SHA-256,SCRAM-SHA-512",
		"SASL mechanisms of SASL listeners: PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 (sasl.enabled.mechanisms)")
	fs.StringVar(&f.interBrokerMechanism, "inter-broker-sasl-mechanism", "SCRAM-SHA-512",
		"mechanism this broker authenticates to peers with on a SASL inter-broker listener")
	fs.StringVar(&f.interBrokerUsername, "inter-broker-sasl-username", "", "user this broker authenticates to peers as")
	fs.StringVar(&f.interBrokerPassFile, "inter-broker-sasl-password-file", "", "`file` holding the password of --inter-broker-sasl-username")
	fs.StringVar(&f.saslBootstrapUsers, "sasl-bootstrap-users", "",
		"`file` of user:password lines; missing SCRAM-SHA-256 and SCRAM-SHA-512 credentials are created at start")
	fs.StringVar(&f.superUsers, "super-users", "", "principals allowed everything, `User:a;User:b` (super.users)")
	fs.BoolVar(&f.authorizer, "authorizer", false, "enforce ACLs: requests not allowed by an ACL are denied")
	fs.BoolVar(&f.allowEveryoneIfNoACL, "allow-everyone-if-no-acl-found", false,
		"with --authorizer, a resource that no ACL matches is open to everyone (allow.everyone.if.no.acl.found)")
	fs.IntVar(&f.maxConnections, "max-connections", 0, "open client connections of the broker, more are closed at accept (max.connections; 0: unlimited)")
	fs.IntVar(&f.maxConnectionsPerIP, "max-connections-per-ip", 0, "open connections from one IP address (max.connections.per.ip; 0: unlimited)")
	fs.Int64Var(&f.queuedMaxRequestBytes, "queued-max-request-bytes", 512<<20,
		"bytes of requests read but not yet handled, across connections; readers wait beyond it (queued.max.request.bytes; 0: unlimited)")
}

// resolve validates the security flags into cfg. advertise is --advertise,
// which --listeners replaces.
func (f *securityFlags) resolve(cfg *broker.Config, advertise string) error {
	switch {
	case f.maxConnections < 0 || f.maxConnectionsPerIP < 0 || f.queuedMaxRequestBytes < 0:
		return usageErrorf("--max-connections, --max-connections-per-ip and --queued-max-request-bytes must be ≥ 0")
	case f.listeners == "" && (f.advertisedListeners != "" || f.protocolMap != ""):
		return usageErrorf("--advertised-listeners and --listener-security-protocol-map need --listeners")
	case f.listeners != "" && advertise != "":
		return usageErrorf("--advertise applies to --listen only: with --listeners use --advertised-listeners")
	}
	cfg.MaxConnections, cfg.MaxConnectionsPerIP = f.maxConnections, f.maxConnectionsPerIP
	cfg.QueuedMaxRequestBytes = f.queuedMaxRequestBytes
	cfg.Authorizer = f.authorizer
	cfg.SuperUsers = splitSemicolons(f.superUsers)
	cfg.AllowEveryoneIfNoACL = f.allowEveryoneIfNoACL
	cfg.InterBrokerListener = strings.ToUpper(strings.TrimSpace(f.interBrokerListener))
	if f.listeners == "" {
		return nil
	}
	listeners, err := broker.ParseListeners(f.listeners, f.advertisedListeners, f.protocolMap)
	if err != nil {
		return usageErrorf("--listeners: %v", err)
	}
	if err := f.secureListeners(cfg, listeners); err != nil {
		return err
	}
	cfg.Listeners = listeners
	return nil
}

// secureListeners gives TLS and SASL settings to the listeners that use
// them, and the peer client settings to cfg.
func (f *securityFlags) secureListeners(cfg *broker.Config, listeners []broker.ListenerConfig) error {
	mechanisms := strings.Split(strings.ReplaceAll(strings.ToUpper(f.saslMechanisms), " ", ""), ",")
	var needTLS, needSASL bool
	for i := range listeners {
		switch listeners[i].Security {
		case broker.SSL:
			needTLS = true
		case broker.SASLSSL:
			needTLS, needSASL = true, true
		case broker.SASLPlaintext:
			needSASL = true
		}
		listeners[i].SASLMechanisms = mechanisms
	}
	if needTLS {
		server, client, err := f.tlsConfigs()
		if err != nil {
			return err
		}
		for i := range listeners {
			listeners[i].TLS = server
		}
		cfg.InterBrokerTLS = client
	}
	if needSASL && f.interBrokerUsername != "" {
		password, err := readFlagSecretFile("--inter-broker-sasl-password-file", f.interBrokerPassFile)
		if err != nil {
			return err
		}
		cfg.InterBrokerSASL = broker.InterBrokerSASL{Mechanism: strings.ToUpper(f.interBrokerMechanism),
			Username: f.interBrokerUsername, Password: password}
	}
	return nil
}

// tlsConfigs loads the certificate, key and CAs: the listeners' server
// configuration and the peer client's.
func (f *securityFlags) tlsConfigs() (server, client *tls.Config, err error) {
	if f.sslCertFile == "" || f.sslKeyFile == "" {
		return nil, nil, usageErrorf("TLS listeners need --ssl-cert-file and --ssl-key-file")
	}
	cert, err := tls.LoadX509KeyPair(f.sslCertFile, f.sslKeyFile)
	if err != nil {
		return nil, nil, usageErrorf("--ssl-cert-file/--ssl-key-file: %v", err)
	}
	server = &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{cert}}
	client = &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{cert}}
	if f.sslCAFile != "" {
		pem, err := os.ReadFile(f.sslCAFile)
		if err != nil {
			return nil, nil, usageErrorf("--ssl-ca-file: %v", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, nil, usageErrorf("--ssl-ca-file %s: no PEM certificate", f.sslCAFile)
		}
		server.ClientCAs, client.RootCAs = pool, pool
	}
	switch f.sslClientAuth {
	case "none", "":
		server.ClientAuth = tls.NoClientCert
	case "requested":
		server.ClientAuth = tls.VerifyClientCertIfGiven
	case "required":
		server.ClientAuth = tls.RequireAndVerifyClientCert
	default:
		return nil, nil, usageErrorf("--ssl-client-auth %q: want none, requested or required", f.sslClientAuth)
	}
	if server.ClientAuth != tls.NoClientCert && server.ClientCAs == nil {
		return nil, nil, usageErrorf("--ssl-client-auth %s needs --ssl-ca-file", f.sslClientAuth)
	}
	return server, client, nil
}

// readFlagSecretFile reads a one-line secret; the error never shows it.
func readFlagSecretFile(flagName, path string) (string, error) {
	if path == "" {
		return "", usageErrorf("%s is required", flagName)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return "", usageErrorf("%s: %v", flagName, err)
	}
	secret := strings.TrimRight(string(b), "\r\n")
	if secret == "" {
		return "", usageErrorf("%s %s is empty", flagName, path)
	}
	return secret, nil
}

func splitSemicolons(s string) []string {
	var out []string
	for _, item := range strings.Split(s, ";") {
		if item = strings.TrimSpace(item); item != "" {
			out = append(out, item)
		}
	}
	return out
}

// bootstrapUser is one line of --sasl-bootstrap-users.
type bootstrapUser struct{ name, password string }

// maxBootstrapUsers bounds the file (it is read whole at start).
const maxBootstrapUsers = 10_000

// readBootstrapUsers parses user:password lines (blank lines and lines
// starting with # are skipped). Errors name the line, never its content.
func readBootstrapUsers(path string) ([]bootstrapUser, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("--sasl-bootstrap-users: %w", err)
	}
	var users []bootstrapUser
	sc := bufio.NewScanner(bytes.NewReader(data))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		name, password, ok := strings.Cut(line, ":")
		if !ok || name == "" || password == "" {
			return nil, fmt.Errorf("--sasl-bootstrap-users %s line %d: want user:password", path, n)
		}
		if users = append(users, bootstrapUser{name, password}); len(users) > maxBootstrapUsers {
			return nil, fmt.Errorf("--sasl-bootstrap-users %s: more than %d users", path, maxBootstrapUsers)
		}
	}
	return users, sc.Err()
}

// bootstrapScramUsers creates the SCRAM-SHA-256 and -512 credentials of
// the file's users that have none; existing credentials are kept, so a
// password changed since through the admin API stays changed.
func bootstrapScramUsers(ctx context.Context, store *metadata.Store, path string, log *slog.Logger) (created int, err error) {
	users, err := readBootstrapUsers(path)
	if err != nil {
		return 0, err
	}
	for _, u := range users {
		for _, mech := range []string{auth.MechScramSHA256, auth.MechScramSHA512} {
			_, found, err := store.ScramCredential(ctx, u.name, mech)
			if err != nil {
				return created, fmt.Errorf("bootstrap user %q: %w", u.name, err)
			}
			if found {
				continue // skips the key derivation; the create below decides
			}
			cred, err := auth.NewScramCredential(mech, u.password, 0)
			if err != nil {
				return created, fmt.Errorf("bootstrap user %q: %w", u.name, err)
			}
			stored, err := store.CreateScramCredential(ctx, u.name, cred)
			if err != nil {
				return created, fmt.Errorf("bootstrap user %q: %w", u.name, err)
			}
			if stored {
				created++
			}
		}
	}
	log.Info("SASL bootstrap users checked", "users", len(users), "credentials_created", created)
	return created, nil
}
