// Package testkit holds the test helpers that more than one package needs:
// polling for a condition, loopback ports, external tools, the strata
// binary, child processes, a client-side connection killer, and the runner
// of golden scripts.
//
// It is imported by tests and by test-support packages (metadatatest,
// tiertest, test/cluster), never by production code, and imports nothing
// from this module, so any package's tests can use it without a cycle.
//
// # External dependencies
//
// A test whose tool (etcd, MinIO, kcat, gcc) is missing skips, except under
// CI=true, where it fails: CI installs every dependency, so a missing one is a
// broken runner, not a reason to pass. [Missing] and [NeedBinary] implement
// that rule in one place.
//
// # Ports
//
// [FreeAddr] hands out loopback ports from below Linux's ephemeral range
// (32768-60999), each at most once per test process. Servers in these tests
// are restarted on the ports they were given; a port chosen with ":0" comes
// from the ephemeral range, where the kernel may meanwhile have used it as
// the local port of an outgoing connection ("address already in use").
//
// # Golden scripts
//
// [RunScripts] runs testdata/*.txt files in etcd raft's datadriven format:
//
//	# comment
//	command key=value key=v1,v2
//	----
//	expected output, one or more lines
//	<blank line>
//
// Each file gets a fresh world; a rewrite flag owned by the calling package
// regenerates the expected output in place.
package testkit
