package auth

import (
	"bytes"
	"crypto/pbkdf2"
	"crypto/subtle"
	"fmt"
	"unicode/utf8"
)

// VerifyPlain checks a SASL PLAIN message (RFC 4616:
// [authzid] NUL user NUL password) against the user's stored SCRAM
// credential: it recomputes StoredKey from the password with the
// credential's salt and iterations and compares in constant time, so no
// plaintext password is ever stored. lookup returns the credential to
// verify against (SASLServer prefers SCRAM-SHA-512, else SCRAM-SHA-256);
// either mechanism is accepted. An unknown user costs the same PBKDF2 work
// as a known one, against a fake credential, before failing.
func VerifyPlain(msg []byte, lookup CredentialLookup) (user string, err error) {
	if len(msg) > MaxMessageSize {
		return "", fmt.Errorf("%w: message of %d bytes exceeds %d", ErrBadMessage, len(msg), MaxMessageSize)
	}
	parts := bytes.Split(msg, []byte{0})
	if len(parts) != 3 {
		return "", fmt.Errorf("%w: PLAIN message must be authzid NUL user NUL password", ErrBadMessage)
	}
	authzid, name, password := string(parts[0]), string(parts[1]), string(parts[2])
	if name == "" || password == "" || !utf8.ValidString(name) {
		return "", fmt.Errorf("%w: empty or non-UTF-8 user or password", ErrBadMessage)
	}
	if authzid != "" && authzid != name {
		return "", fmt.Errorf("%w: authorization id differs from the user", ErrAuthFailed)
	}
	cred, found, err := lookup(name)
	if err != nil {
		return "", fmt.Errorf("auth: credential lookup: %w", err)
	}
	known := found && cred.Validate() == nil
	if !known {
		cred = fakeCredential(MechScramSHA512, name)
	}
	if !passwordMatches(cred, password) || !known {
		return "", fmt.Errorf("%w: invalid credentials", ErrAuthFailed)
	}
	return name, nil
}

// passwordMatches recomputes StoredKey = H(HMAC(Hi(password), "Client
// Key")). REQUIRES: cred is valid.
func passwordMatches(cred ScramCredential, password string) bool {
	newHash, err := hashFor(cred.Mechanism)
	if err != nil {
		return false
	}
	salted, err := pbkdf2.Key(newHash, password, cred.Salt, cred.Iterations, newHash().Size())
	if err != nil {
		return false
	}
	storedKey := hashSum(newHash, hmacSum(newHash, salted, []byte("Client Key")))
	return subtle.ConstantTimeCompare(storedKey, cred.StoredKey) == 1
}
