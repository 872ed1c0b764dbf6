// Package auth holds Strata's authentication and authorization logic: the
// server side of SASL SCRAM-SHA-256/512 (RFC 5802, RFC 7677), SASL PLAIN
// verified against stored SCRAM credentials (RFC 4616), the SASL sequence
// of one connection (SASLServer), and Kafka's ACL model. It is pure: no
// I/O, no goroutines, no clocks. The broker feeds it the client's bytes
// and a CredentialSource backed by etcd (metadata.Store.ScramCredential);
// its authorization checks go to an Authorizer built from
// metadata.Store.ACLs, which subpackage acl keeps current.
//
// # SASL sequence
//
// A SASLServer is one connection's authentication: Handshake chooses a
// mechanism once, among those the listener offers (DefaultMechanisms, the
// two SCRAM ones, unless configured; PLAIN is opt-in), then Step feeds it
// the client's tokens until it names the user. Out-of-sequence calls fail
// with ErrSASLState (Kafka's ILLEGAL_SASL_STATE), an unoffered mechanism
// with ErrMechanismNotEnabled; after a success or any error every further
// Step fails. Credentials come from a CredentialSource: the first stored
// credential among the mechanisms asked, in order (PLAIN asks for
// SCRAM-SHA-512, then SCRAM-SHA-256; a SCRAM mechanism for its own). The
// Kafka framing (SaslHandshake, SaslAuthenticate, v0 raw tokens) is
// broker/wire's SASLSession.
//
// # SCRAM exchange
//
// Kafka carries each SASL message in a SaslAuthenticate request (KIP-152).
// A ScramServer accepts exactly this sequence; names are saslnames ("," is
// written "=2C" and "=" is "=3D"), nonces printable ASCII without ",":
//
//	client-first   n,[a=<authzid>],n=<user>,r=<client nonce>
//	server-first   r=<client nonce><server nonce>,s=<base64 salt>,i=<iterations>
//	client-final   c=<base64 of the gs2 header "n,[a=<authzid>],">,r=<client nonce><server nonce>,p=<base64 proof>
//	server-final   v=<base64 server signature>
//
// with, H the mechanism's hash and HMAC keyed by its first argument:
//
//	SaltedPassword  = PBKDF2-HMAC-H(password, salt, iterations)
//	ClientKey       = HMAC(SaltedPassword, "Client Key")
//	StoredKey       = H(ClientKey)                              stored
//	ServerKey       = HMAC(SaltedPassword, "Server Key")         stored
//	AuthMessage     = client-first-bare "," server-first "," client-final-without-proof
//	ClientProof     = ClientKey XOR HMAC(StoredKey, AuthMessage)
//	ServerSignature = HMAC(ServerKey, AuthMessage)
//
// Rules the server enforces (each failure ends the exchange with an error;
// the broker answers SASL_AUTHENTICATION_FAILED and closes):
//
//   - Every message is at most MaxMessageSize (4 KiB) bytes, checked
//     before parsing.
//   - No channel binding: the gs2 flag must be "n" ("p=..." and "y" are
//     refused, as Kafka does), and c= must be exactly the base64 of the
//     gs2 header the client sent first.
//   - No extensions: "m=" (mandatory) and any attribute after the nonce
//     (Kafka's tokenauth=true included: delegation tokens are not
//     supported) are refused, in both client messages.
//   - An authzid, if given, must equal the user.
//   - The client-final nonce must be exactly client nonce + server nonce
//     (the check whose absence was CVE-2024-56128). The server nonce is 24
//     random bytes (base64url).
//   - The proof is checked by recomputing H(ClientKey) and comparing it with
//     StoredKey in constant time.
//   - An unknown user is not revealed at the first step: it is challenged
//     with a fake credential (a salt derived from the user name with a
//     per-process random key, so it is stable across attempts, and
//     DefaultIterations) and fails only at the proof, as Kafka does. A
//     stored credential of the wrong mechanism, or one that fails
//     Validate, is treated the same way.
//
// Credentials: Mechanism SCRAM-SHA-256 or SCRAM-SHA-512, a salt of
// 1..MaxSaltSize bytes (32 random bytes when generated here), iterations in
// MinIterations..MaxIterations (4096..16384, Kafka's bounds; default 8192),
// StoredKey and ServerKey of the hash's size. Passwords are never stored.
//
// # PLAIN
//
// A PLAIN message is "[authzid] NUL user NUL password" (at most 4 KiB; the
// authzid empty or equal to the user). VerifyPlain recomputes StoredKey from
// the password with the stored credential's salt and iterations and compares
// in constant time; an unknown user is checked against a fake credential,
// costing the same PBKDF2 work, and fails. PLAIN sends the password itself,
// so brokers offer it only on TLS listeners.
//
// # ACLs
//
// An ACL is Kafka's AclBinding: (resource type, resource name, pattern
// type) + (principal, host, operation, permission), each enum with Kafka's
// wire code (so kmsg values convert directly). Principals are "User:<name>"
// ("User:ANONYMOUS" when unauthenticated). Resource names: literal patterns
// match the name exactly, the literal "*" matches every name, prefixed
// patterns match every name that starts with them. The cluster resource is
// named "kafka-cluster".
//
// Authorizer.Authorized follows Kafka's StandardAuthorizer:
//
//  1. A super user is allowed everything.
//  2. An ACL applies when its pattern matches the resource, its principal
//     is the principal or "<type>:*", and its host is the host or "*".
//  3. Any applicable DENY whose operation is the operation or All refuses
//     (deny overrides allow; implied operations do not widen a DENY).
//  4. Else any applicable ALLOW whose operation is the operation, All, or
//     implies it allows: Read, Write, Delete and Alter imply Describe;
//     AlterConfigs implies DescribeConfigs.
//  5. Else refuse (deny by default; Kafka's allow.everyone.if.no.acl.found
//     is not supported). IdempotentWrite on the cluster implied by Write on
//     any topic is the caller's rule, not this package's.
//
// ACLFilter is Kafka's AclBindingFilter: Any values and "" (Kafka's null)
// match everything; PatternMatch selects every pattern that applies to the
// filter's name; PatternAny selects literal and prefixed patterns whose name
// equals it.
package auth
