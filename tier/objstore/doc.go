// Package objstore is the object-store seam of the tier (DESIGN.md §5): the
// ObjectStore interface, its key rules and error classes, an in-memory
// implementation, and wrappers that count, delay, inject faults and retry.
// Backends live in tier/file and tier/s3; tier.OpenURL picks one from a URL.
// The key layout and the object format are documented in tier/doc.go.
//
// # Wrappers
//
//	NewMemStore()              in-memory store (tests, tools)
//	NewCounting(s)             requests, errors and bytes per operation and topic
//	NewLatency(s, d)           adds a fixed delay to every call (tests, benchmarks)
//	NewFaulty(s)               injects 503 SlowDown, timeouts, generic errors on
//	                           the Nth matching call, truncated GET bodies, and
//	                           "lost acknowledgements" (the call succeeds, the
//	                           caller sees an error)
//	NewRetrying(s, policy)     retries transient errors with capped exponential
//	                           backoff and full jitter; resumes a GET body that
//	                           breaks mid-stream from where it stopped
//
// Typical production stack (tier.OpenURL): Retrying(Counting(backend)), so
// that every attempt is counted as the request the provider bills.
//
// # Transient errors
//
// IsTransient is true for: errors wrapping ErrTransient (backends wrap S3
// 500/502/503/504, SlowDown, RequestTimeout, throttling codes, connection
// refused/reset, and the fault injector's errors), errors with Timeout() true
// (net timeouts), io.ErrUnexpectedEOF (a body cut short) and a per-attempt
// context.DeadlineExceeded. Everything else — not found, invalid keys or
// ranges, access denied, a body of the wrong size, the caller's own context
// ending — is permanent and returned at once.
package objstore
