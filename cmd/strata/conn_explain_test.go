package main

import (
	"crypto/x509"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

func TestExplainConnError(t *testing.T) {
	scram := &connSummary{seeds: []string{"b1:9093"}, tls: true, saslMechanism: "SCRAM-SHA-512", saslUser: "admin"}
	plainSASL := &connSummary{seeds: []string{"b1:9093"}, saslMechanism: "SCRAM-SHA-512", saslUser: "admin"}
	tlsOnly := &connSummary{seeds: []string{"b1:9093"}, tls: true}
	refused := fmt.Errorf("%w: invalid credentials with SASL mechanism SCRAM-SHA-512", kerr.SaslAuthenticationFailed)
	for _, c := range []struct {
		name string
		err  error
		conn *connSummary
		want string // the whole message; "" : err unchanged
	}{
		{"sasl refused, behind kadm's shard errors", fmt.Errorf("request ListGroups: %w", errors.Join(errors.New("other shard"), refused)), scram,
			`SASL authentication failed at b1:9093 as user "admin" (SCRAM-SHA-512): invalid credentials with SASL mechanism SCRAM-SHA-512; check --sasl-username and --sasl-password-file`},
		{"sasl refused without a reason", fmt.Errorf("group g: %w", kerr.SaslAuthenticationFailed), scram,
			`SASL authentication failed at b1:9093 as user "admin" (SCRAM-SHA-512); check --sasl-username and --sasl-password-file`},
		{"plaintext to a TLS listener", fmt.Errorf("no broker answered: %w", &kgo.ErrFirstReadEOF{}), plainSASL,
			"the broker at b1:9093 closed the connection without answering: it most likely is a TLS listener; connect with --tls (or --tls-ca-file with the cluster's CA)"},
		{"no SASL to a SASL listener", &kgo.ErrFirstReadEOF{}, tlsOnly,
			"the broker at b1:9093 closed the connection without answering: it most likely requires SASL; give --sasl-mechanism, --sasl-username and --sasl-password-file"},
		{"untrusted certificate", fmt.Errorf("dial: %w", x509.UnknownAuthorityError{}), scram,
			"TLS: the certificate of the broker at b1:9093 is not signed by a CA this client trusts; give the cluster's CA with --tls-ca-file (x509: certificate signed by unknown authority)"},
		{"neither TLS nor SASL", &kgo.ErrFirstReadEOF{}, &connSummary{seeds: []string{"b1:9092", "b2:9092"}},
			"the broker at b1:9092,b2:9092 closed the connection without answering: it most likely wants TLS (--tls, --tls-ca-file) or SASL (--sasl-mechanism, --sasl-username, --sasl-password-file)"},
		{"an EOF with TLS and SASL on is left to kgo", &kgo.ErrFirstReadEOF{}, scram, ""},
		{"not a connection error", kerr.TopicAuthorizationFailed, scram, ""},
		{"no connection resolved", refused, nil, ""},
		{"no error", nil, scram, ""},
	} {
		got := explainConnError(c.err, c.conn)
		if c.want == "" {
			if got != c.err {
				t.Errorf("%s: got %v, want the error unchanged", c.name, got)
			}
			continue
		}
		if got.Error() != c.want {
			t.Errorf("%s:\n got %s\nwant %s", c.name, got, c.want)
		}
		if strings.Contains(got.Error(), "\n") || !errors.Is(got, c.err) {
			t.Errorf("%s: %q is not one line wrapping the original error", c.name, got)
		}
	}
}
