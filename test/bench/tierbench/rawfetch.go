package main

// The raw-fetch cold reader: the cold read (and the backfill) without a
// consumer library's CPU. The client itself is bench.ReadRaw (shared with
// `strata bench consume --client raw`): raw kmsg Fetch requests to each
// partition's leader over its own connection with one reused response
// buffer, batches CRC-checked but records not decoded, one Fetch in
// flight per leader. See test/bench/rawfetch.go for why.

import (
	"context"
	"log/slog"
	"os"

	"github.com/strata-log/strata/test/bench"
)

// readColdRaw reads every partition in ends from offset 0 to its end with
// bench.ReadRaw, until done or ctx ends. records counts records;
// valueBytes counts whole record-batch bytes. o.bytesPerSec paces each
// leader's reader, as pace does the kgo reader.
func readColdRaw(ctx context.Context, brokers []string, topic string, ends map[int32]int64, o coldOpts) (coldRead, error) {
	res, err := bench.ReadRaw(ctx, brokers, topic, nil, ends, bench.RawOptions{
		PartitionMaxBytes: max(0, o.maxPartBytes), // 0: kgo's default, 1 MiB
		BytesPerSec:       o.bytesPerSec,
		ClientID:          "tierbench-raw",
		Logger:            slog.New(slog.NewTextHandler(os.Stderr, nil)),
	})
	return coldRead{records: res.Records, valueBytes: res.Bytes, elapsed: res.Elapsed, complete: res.Complete}, err
}
