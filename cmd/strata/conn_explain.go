package main

import (
	"crypto/x509"
	"errors"
	"fmt"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// connSummary is what a command resolved its connection settings to, kept
// to explain a failure to connect.
type connSummary struct {
	seeds         []string
	tls           bool
	saslMechanism string // "" without SASL
	saslUser      string
}

// connError is a failure to get a session with the brokers at all, in
// terms of the setting to fix.
type connError struct {
	msg string
	err error
}

func (e *connError) Error() string { return e.msg }
func (e *connError) Unwrap() error { return e.err }

// explainConnError rewrites err when it means that the client never got a
// session with the brokers: SASL refused the credentials, the listener
// wants TLS or SASL the client did not offer, or TLS did not trust the
// broker's certificate. Such an error is the whole story of the command,
// wherever it surfaced (kadm's per-shard wrapping, produce's metadata
// check), so the result replaces err's text with one line that names the
// brokers and the setting to fix. Any other error, or a nil conn (the
// command never resolved a connection), is returned unchanged.
func explainConnError(err error, conn *connSummary) error {
	if err == nil || conn == nil {
		return err
	}
	at := strings.Join(conn.seeds, ",")
	var firstEOF *kgo.ErrFirstReadEOF
	var unknownCA x509.UnknownAuthorityError
	var wrongHost x509.HostnameError
	switch {
	case errors.Is(err, kerr.SaslAuthenticationFailed):
		msg := fmt.Sprintf("SASL authentication failed at %s as user %q (%s)", at, conn.saslUser, conn.saslMechanism)
		if reason := brokerReason(err, kerr.SaslAuthenticationFailed); reason != "" {
			msg += ": " + reason
		}
		return &connError{msg + "; check --sasl-username and --sasl-password-file", err}
	case errors.Is(err, kerr.UnsupportedSaslMechanism):
		return &connError{fmt.Sprintf("the brokers at %s do not offer SASL mechanism %s (see --sasl-mechanism): %v", at, conn.saslMechanism, err), err}
	case errors.As(err, &firstEOF) && !conn.tls && conn.saslMechanism == "":
		// A TLS listener and a SASL_PLAINTEXT one both hang up on such a
		// client; kgo's error does not say which it saw.
		return &connError{fmt.Sprintf("the broker at %s closed the connection without answering: it most likely wants TLS "+
			"(--tls, --tls-ca-file) or SASL (--sasl-mechanism, --sasl-username, --sasl-password-file)", at), err}
	case errors.As(err, &firstEOF) && !conn.tls:
		return &connError{fmt.Sprintf("the broker at %s closed the connection without answering: "+
			"it most likely is a TLS listener; connect with --tls (or --tls-ca-file with the cluster's CA)", at), err}
	case errors.As(err, &firstEOF) && conn.saslMechanism == "":
		return &connError{fmt.Sprintf("the broker at %s closed the connection without answering: "+
			"it most likely requires SASL; give --sasl-mechanism, --sasl-username and --sasl-password-file", at), err}
	case errors.As(err, &unknownCA):
		return &connError{fmt.Sprintf("TLS: the certificate of the broker at %s is not signed by a CA this client trusts; "+
			"give the cluster's CA with --tls-ca-file (%v)", at, unknownCA), err}
	case errors.As(err, &wrongHost):
		return &connError{fmt.Sprintf("TLS: the certificate of the broker at %s does not name that address; "+
			"connect by a name the certificate holds (%v)", at, wrongHost), err}
	}
	return err
}

// brokerReason is the broker's own message that came with code (kgo wraps
// a response's ErrorMessage as "<code>: <message>"), or "".
func brokerReason(err error, code *kerr.Error) string {
	prefix := code.Error() + ": "
	if msg, ok := strings.CutPrefix(err.Error(), prefix); ok {
		return msg
	}
	switch u := err.(type) {
	case interface{ Unwrap() error }:
		if inner := u.Unwrap(); inner != nil {
			return brokerReason(inner, code)
		}
	case interface{ Unwrap() []error }:
		for _, inner := range u.Unwrap() {
			if reason := brokerReason(inner, code); reason != "" {
				return reason
			}
		}
	}
	return ""
}
