// Package acl keeps a broker's view of the cluster's ACLs current and
// answers its authorization questions. The rules themselves are package
// auth's (auth.Authorizer, pure); this package adds what needs I/O, a clock
// and a goroutine: loading the ACLs from a Store (etcd, through
// *metadata.Store) and following its changes.
//
// # Snapshots
//
// A Checker holds one immutable Snapshot (an auth.Authorizer plus the ACL
// list it was built from and the etcd revision that list was read at)
// behind an atomic pointer, so a check takes no lock and sees one
// consistent set of ACLs. Invariants:
//
//   - A snapshot is never modified once installed; a reload builds a new
//     one and swaps it in with compare-and-swap.
//   - The installed revision never goes back: a reload that read an
//     older revision than the one in place installs nothing (the security
//     loop and the ACL handlers reload concurrently).
//   - Until the first load completes the snapshot is empty (revision 0):
//     every check fails except for super users.
//
// # The loop
//
// Start opens the store's watch, loads once (an error fails the start),
// then reloads after each change until the broker's lifetime ends, so an
// ACL change reaches every broker within one etcd watch round trip. The
// watch is opened before the first load, so a change between the two is
// not missed. A failed reload keeps the previous snapshot in force and is
// retried after a second; a watch channel that closes while the broker
// lives is opened again and followed by a reload (changes may have been
// missed meanwhile). Each reload is bounded by ReloadTimeout.
//
// # Checks
//
// A Checker that is off (its zero value, or Configure(false, ...)) allows
// everything, as a Kafka broker without authorizer.class.name. Checks take
// a Requester: the principal ("User:<name>"), the client host, and the
// Kafka API key, which is only logged when a check denies.
// AllowedIdempotentWrite is Kafka's rule for InitProducerId without a
// transactional id; Operations is the authorized_operations bit field
// Kafka reports per resource.
package acl
