package auth

import (
	"crypto/hmac"
	"crypto/pbkdf2"
	"crypto/rand"
	"crypto/sha256"
	"crypto/sha512"
	"errors"
	"fmt"
	"hash"
	"strconv"
	"strings"
	"unicode/utf8"
)

// SASL mechanism names, as Kafka spells them.
const (
	MechPlain       = "PLAIN"
	MechScramSHA256 = "SCRAM-SHA-256"
	MechScramSHA512 = "SCRAM-SHA-512"
)

const (
	// MinIterations and MaxIterations bound a SCRAM credential's PBKDF2
	// iteration count, as Kafka does (4096..16384): the minimum is RFC
	// 7677's, the maximum keeps one PLAIN login from costing a broker
	// more than a few milliseconds.
	MinIterations = 4096
	MaxIterations = 16384
	// DefaultIterations is used when NewScramCredential gets 0.
	DefaultIterations = 8192
	// MaxMessageSize bounds every SASL message (SCRAM and PLAIN) a client
	// may send; anything longer is refused before it is parsed.
	MaxMessageSize = 4096
	// MaxSaltSize bounds a stored salt (and a salted password from
	// AlterUserScramCredentials).
	MaxSaltSize = 1024
	// saltSize is the size of the salts this package generates.
	saltSize = 32
)

// Sentinel errors. Callers answer every one of them with Kafka's
// SASL_AUTHENTICATION_FAILED and close the connection; the distinction is
// for logs and tests.
var (
	ErrAuthFailed        = errors.New("auth: authentication failed")
	ErrBadMessage        = errors.New("auth: malformed SASL message")
	ErrUnknownMechanism  = errors.New("auth: unknown SASL mechanism")
	ErrInvalidCredential = errors.New("auth: invalid SCRAM credential")
	ErrInvalidACL        = errors.New("auth: invalid ACL")
)

// ScramCredential is what the server stores for one user and mechanism
// (RFC 5802 §3): never the password, only the salt, the iteration count
// and the two keys derived from the salted password.
type ScramCredential struct {
	Mechanism  string // MechScramSHA256 or MechScramSHA512
	Salt       []byte
	Iterations int
	StoredKey  []byte // H(HMAC(SaltedPassword, "Client Key"))
	ServerKey  []byte // HMAC(SaltedPassword, "Server Key")
}

// hashFor returns the hash of a SCRAM mechanism.
func hashFor(mech string) (func() hash.Hash, error) {
	switch mech {
	case MechScramSHA256:
		return sha256.New, nil
	case MechScramSHA512:
		return sha512.New, nil
	}
	return nil, fmt.Errorf("%w: %q", ErrUnknownMechanism, mech)
}

// Validate checks a credential (for instance one read from etcd): a known
// mechanism, a 1..MaxSaltSize byte salt, MinIterations..MaxIterations, and
// keys of the hash's size.
func (c ScramCredential) Validate() error {
	newHash, err := hashFor(c.Mechanism)
	if err != nil {
		return err
	}
	size := newHash().Size()
	switch {
	case len(c.Salt) == 0 || len(c.Salt) > MaxSaltSize:
		return fmt.Errorf("%w: salt of %d bytes", ErrInvalidCredential, len(c.Salt))
	case c.Iterations < MinIterations || c.Iterations > MaxIterations:
		return fmt.Errorf("%w: %d iterations, want %d..%d", ErrInvalidCredential, c.Iterations, MinIterations, MaxIterations)
	case len(c.StoredKey) != size || len(c.ServerKey) != size:
		return fmt.Errorf("%w: keys of %d and %d bytes, want %d", ErrInvalidCredential, len(c.StoredKey), len(c.ServerKey), size)
	}
	return nil
}

// NewScramCredential derives a credential from a password with a random
// 32-byte salt. iterations 0 means DefaultIterations.
func NewScramCredential(mech, password string, iterations int) (ScramCredential, error) {
	newHash, err := hashFor(mech)
	if err != nil {
		return ScramCredential{}, err
	}
	if iterations == 0 {
		iterations = DefaultIterations
	}
	if password == "" || len(password) > MaxMessageSize {
		return ScramCredential{}, fmt.Errorf("%w: password must be 1..%d bytes", ErrInvalidCredential, MaxMessageSize)
	}
	if iterations < MinIterations || iterations > MaxIterations {
		return ScramCredential{}, fmt.Errorf("%w: %d iterations, want %d..%d", ErrInvalidCredential, iterations, MinIterations, MaxIterations)
	}
	salt := make([]byte, saltSize)
	rand.Read(salt)
	salted, err := pbkdf2.Key(newHash, password, salt, iterations, newHash().Size())
	if err != nil {
		return ScramCredential{}, fmt.Errorf("%w: %v", ErrInvalidCredential, err)
	}
	return ScramCredentialFromSalted(mech, salt, iterations, salted)
}

// ScramCredentialFromSalted builds a credential from a salted password
// (Hi(password, salt, i)), the form AlterUserScramCredentials carries.
func ScramCredentialFromSalted(mech string, salt []byte, iterations int, saltedPassword []byte) (ScramCredential, error) {
	newHash, err := hashFor(mech)
	if err != nil {
		return ScramCredential{}, err
	}
	if len(saltedPassword) == 0 || len(saltedPassword) > MaxSaltSize {
		return ScramCredential{}, fmt.Errorf("%w: salted password of %d bytes", ErrInvalidCredential, len(saltedPassword))
	}
	clientKey := hmacSum(newHash, saltedPassword, []byte("Client Key"))
	c := ScramCredential{
		Mechanism:  mech,
		Salt:       append([]byte(nil), salt...),
		Iterations: iterations,
		StoredKey:  hashSum(newHash, clientKey),
		ServerKey:  hmacSum(newHash, saltedPassword, []byte("Server Key")),
	}
	if err := c.Validate(); err != nil {
		return ScramCredential{}, err
	}
	return c, nil
}

func hmacSum(newHash func() hash.Hash, key, msg []byte) []byte {
	m := hmac.New(newHash, key)
	m.Write(msg)
	return m.Sum(nil)
}

func hashSum(newHash func() hash.Hash, msg []byte) []byte {
	h := newHash()
	h.Write(msg)
	return h.Sum(nil)
}

// fakeSaltKey keys the salts shown for unknown users. It is drawn once per
// process and never changes, so repeated attempts for the same unknown
// user see the same salt, as they would for a real one.
var fakeSaltKey = func() []byte {
	k := make([]byte, 32)
	rand.Read(k)
	return k
}()

// fakeCredential is what an unknown user is challenged with: a stable salt,
// the default iteration count and random keys no proof can match.
func fakeCredential(mech, user string) ScramCredential {
	newHash, _ := hashFor(mech)
	size := newHash().Size()
	c := ScramCredential{
		Mechanism:  mech,
		Salt:       hmacSum(sha256.New, fakeSaltKey, []byte(mech+"\x00"+user)),
		Iterations: DefaultIterations,
		StoredKey:  make([]byte, size),
		ServerKey:  make([]byte, size),
	}
	rand.Read(c.StoredKey)
	rand.Read(c.ServerKey)
	return c
}

// decodeSaslName undoes RFC 5802's escaping of a username or authzid:
// "=2C" is ',' and "=3D" is '='; any other '=' or a ',' is malformed.
func decodeSaslName(s string) (string, error) {
	if s == "" || !utf8.ValidString(s) {
		return "", fmt.Errorf("%w: empty or non-UTF-8 name", ErrBadMessage)
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		switch c := s[i]; c {
		case ',':
			return "", fmt.Errorf("%w: unescaped ',' in name", ErrBadMessage)
		case '=':
			switch {
			case strings.HasPrefix(s[i:], "=2C"):
				b.WriteByte(',')
			case strings.HasPrefix(s[i:], "=3D"):
				b.WriteByte('=')
			default:
				return "", fmt.Errorf("%w: bad '=' escape in name", ErrBadMessage)
			}
			i += 2
		default:
			b.WriteByte(c)
		}
	}
	return b.String(), nil
}

// validNonce: printable ASCII except ',' (RFC 5802 "printable").
func validNonce(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < 0x21 || s[i] > 0x7e || s[i] == ',' {
			return false
		}
	}
	return true
}

func itoa(n int) string { return strconv.Itoa(n) }
