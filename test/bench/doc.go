// Package bench is Strata's benchmark harness: the produce and consume
// workloads behind `strata bench`, and the latency histogram they report
// through. It is importable so that tests and other harnesses (the
// multi-broker and cold-read suites of later issues) reuse the same
// measurement code. Benchmarks are not tests: nothing here asserts speed.
//
// # Histogram
//
// Histogram is an HDR-style log-linear histogram over non-negative int64
// values (the workloads record nanoseconds). With P = SubBucketBits:
//
//	value v < 2^P                  bucket v                 (exact)
//	value v in [2^k, 2^(k+1)), k≥P  bucket (k-P+1)·2^P + (v>>(k-P)) - 2^P
//
// so every power-of-two range is split into 2^P equal sub-buckets and a
// bucket's width is at most v/2^P: with P = 7 every reported value is within
// 1/128 (< 0.8 %) of the true one. Quantiles report the highest value that
// falls in the chosen bucket, as HdrHistogram does, so they never understate
// a latency. The whole int64 range fits in (64-P)·2^P counters (~58 KiB).
//
// # Coordinated omission
//
// A closed-loop load generator that waits for the system before sending the
// next request stops measuring exactly when the system stalls: the requests
// it would have sent during the stall are never timed. When a target rate is
// given (ProduceConfig.Rate), record i of a worker has an intended send time
// start + i/rate, and its latency is measured from that intended time, not
// from the moment the producer actually got to send it. A stall therefore
// shows up in the latency of every record that should have been sent during
// it, as an open-loop client (a real application) would see it. Without a
// target rate the workload runs flat out and latency is measured from the
// Produce call to its acknowledgement (kgo's promise); that latency includes
// time spent queued in the client's buffer and says how long the pipeline
// is, not how fast a single request is. Histogram.RecordCorrected offers
// HdrHistogram's other correction (back-filling samples at an expected
// interval) for callers that know their interval but not intended times.
//
// # Raw Fetch client
//
// ReadRaw (rawfetch.go, rawconn.go) is the one raw Fetch client, used by
// `strata bench consume --client raw` (RunRawConsume) and by tierbench's
// raw cold and backfill readers. It sends kmsg Fetch requests to each
// leader over a connection of its own, one in flight per leader, reads
// every response into one reused buffer (every frame size bounded before
// allocation) and only walks the batches (framing, offsets, CRC-32C),
// never decoding records: a kgo consumer's decoding, and kgo's fresh
// buffer per response, would take the CPU of the 2-core machine the
// broker needs, so the number would be the client's, not the broker's.
// Its byte counts are whole record batches.
//
// # Units
//
// MB/s is 10^6 bytes per second of record values (keys are nil, headers
// none), the unit dd reports, so the two can be compared directly.
package bench
