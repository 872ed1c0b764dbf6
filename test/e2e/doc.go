// Package e2e holds Strata's end-to-end acceptance tests. They build the real
// strata binary (or use $STRATA_BIN), start it as a child process on
// loopback ports with its own data directory, and judge it with other
// people's clients: franz-go (kgo, kadm, raw kmsg requests) and the kcat
// binary.
//
// Modes:
//
//   - default: each broker runs etcd embedded under <data-dir>/etcd;
//   - STRATA_TEST_ETCD=external: TestMain starts one real etcd server (the
//     etcd binary on PATH) for the whole run and every broker gets --etcd and
//     a cluster name of its own, so tests never share metadata.
//
// A missing etcd or kcat binary fails the test when CI=true and skips it
// otherwise. Every wait is bounded; every broker is killed at cleanup and its
// combined stdout/stderr is printed when the test failed.
//
// Topics that need tiny segments set internal.segment.bytes: segment.bytes
// has Kafka 4's 1 MiB minimum (KIP-1030). -short shrinks the 1,000,000-record
// test to 100,000 records.
//
// Run: go test -timeout 600s ./test/e2e/
// and: STRATA_TEST_ETCD=external go test -timeout 600s ./test/e2e/
package e2e
