package main

// strata replay (DESIGN.md §8): stream a range of a topic straight from
// the bucket, with no broker and no etcd.
//
//	strata replay --object-store URL --topic T [--cluster C] [--topic-id ID]
//	    [--partitions 0,2] --from BOUND [--to BOUND] [--allow-partial]
//	    [--format raw|json|kcat] [--isolation read_committed|read_uncommitted]
//	    [--to-brokers host:port,... [--to-topic T2]]
//
// Bounds: a plain integer or offset:N is an offset; an RFC 3339 time
// (2026-01-02T15:04:05Z) or ms:N (Unix milliseconds) is a time. --to is
// inclusive. Times act as a consumer seeking by time would: a partition
// starts at its first record with timestamp >= --from and stops before its
// first record with timestamp > --to (with non-monotonic timestamps, a
// record between the two is printed whatever its own timestamp).
// Partitions are printed one after another, ascending, each in offset order:
// without --partitions, 0..N-1 for the N of the topic's topic.json (only
// the partitions that have objects when the bucket has no usable one).
//
// # Where the bucket ends
//
// The bucket holds what was uploaded: not the hot tail of the cluster
// that wrote it (for a diskless topic, its runs not merged yet), nor what
// retention deleted, and it cannot tell whether records exist past its end. After each partition, one line on stderr
// (stdout carries records only) names the offsets written, where the
// bucket starts (if after --from) and ends (its last offset and the time
// of that record: the last object's max timestamp), and any hole (offsets
// inside the range that no object holds):
//
//	strata replay: partition 3: replayed offsets 0-1041; the bucket ends at offset 1041 (2026-12-04T17:00:01Z); no --to: stopped at the bucket's end
//
// The range is partial when the bucket does not hold all of it:
//
//   - the partition has no objects;
//   - --to is an offset past the partition's last offset in the bucket, or
//     a time later than its last record's while no record past --to was read;
//   - a hole lies inside the range (for a time --from, the range starts
//     after the leading objects whose records all predate it: the bucket
//     cannot date a hole's records);
//   - --from is an offset above 0 and below the partition's first offset in
//     the bucket, as Kafka answers OFFSET_OUT_OF_RANGE to. --from 0, or a
//     time, asks for the beginning, wherever retention left it (as
//     auto.offset.reset=earliest does): not partial.
//
// Without --to, replay stops at each partition's end in the bucket, which
// is not partial. After a partial range, replay still writes everything the
// bucket holds, then names each partition and what it misses, and exits 1;
// --allow-partial makes that a warning and exits 0.
//
// Formats (one record per line):
//
//	raw   the value bytes and "\n" (kcat -C's default output)
//	json  {"topic":..,"partition":..,"offset":..,"timestamp":<ms>,"key":..,"value":..,
//	       "headers":[{"key":..,"value":..}]}; key, value and header values are
//	      base64 (standard, padded) or null: DESIGN.md §11's contract, so any
//	      bytes round-trip and scripts decode one way
//	kcat  kcat -C -J's line: {"topic","partition","offset","tstype","ts","broker":-1,
//	      ["headers":[k,v,...]],"key","payload"}; bytes written as is, like kcat
//
// read_committed (default) drops aborted transactions and never prints a
// transaction whose marker is not in the bucket (it reports where it
// stopped on stderr); control batches are never printed. Objects that
// overlap are resolved as tier/replay.go documents. Progress (records,
// bytes, ETA) goes to stderr only when stderr is a terminal.
//
// With --to-brokers the records are produced, instead of printed, into
// --to-topic (default: the same name) of a running cluster: key, value,
// headers and timestamp kept, each into the partition of its number (the
// target needs at least as many partitions), acks=all and idempotent, so
// per-partition order is the bucket's. --format is ignored then.

import (
	"bufio"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
	"golang.org/x/sys/unix"

	"github.com/strata-log/strata/metadata"
	"github.com/strata-log/strata/recordbatch"
	"github.com/strata-log/strata/tier"
)

// replayMaxDecompressed bounds one batch's decompressed records.
const replayMaxDecompressed = 256 << 20

// replayBound is a --from/--to value: an offset or a time (Unix ms).
type replayBound struct {
	set    bool
	isTime bool
	value  int64
}

// parseReplayBound reads N, offset:N, ms:N or an RFC 3339 time.
func parseReplayBound(name, s string) (replayBound, error) {
	bad := func(why string) (replayBound, error) {
		return replayBound{}, usageErrorf("--%s %q: %s (want an offset N or offset:N, a time 2026-01-02T15:04:05Z or ms:<unix ms>)", name, s, why)
	}
	switch {
	case s == "":
		return bad("empty")
	case strings.HasPrefix(s, "offset:"), s[0] >= '0' && s[0] <= '9' && !strings.ContainsAny(s, "-:T"):
		n, err := strconv.ParseInt(strings.TrimPrefix(s, "offset:"), 10, 64)
		if err != nil || n < 0 {
			return bad("not an offset")
		}
		return replayBound{set: true, value: n}, nil
	case strings.HasPrefix(s, "ms:"):
		n, err := strconv.ParseInt(strings.TrimPrefix(s, "ms:"), 10, 64)
		if err != nil {
			return bad("not Unix milliseconds")
		}
		return replayBound{set: true, isTime: true, value: n}, nil
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return bad("not RFC 3339")
	}
	return replayBound{set: true, isTime: true, value: t.UnixMilli()}, nil
}

// replayConfig is the parsed command line.
type replayConfig struct {
	store, cluster, topic, topicID string
	partitions                     []int32 // nil: all
	from, to                       replayBound
	format                         string
	committed                      bool
	toBrokers                      []string // produce into a cluster instead of printing
	toTopic                        string
	allowPartial                   bool // a partial range is a warning, not an error
}

func parseReplayArgs(c *cli, args []string) (replayConfig, error) {
	var cfg replayConfig
	fs := newFlagSet("replay", c)
	fs.StringVar(&cfg.store, "object-store", "", "the bucket `URL` (file:///path or s3://bucket/prefix?...)")
	fs.StringVar(&cfg.cluster, "cluster", metadata.DefaultCluster, "cluster name (the bucket prefix of its topics)")
	fs.StringVar(&cfg.topic, "topic", "", "topic to replay")
	fs.StringVar(&cfg.topicID, "topic-id", "", "topic id, when the bucket holds several topics of that name")
	parts := fs.String("partitions", "", "comma-separated partitions (default: all)")
	from := fs.String("from", "", "first offset (N, offset:N) or time (RFC 3339, ms:N)")
	to := fs.String("to", "", "last offset or time, inclusive (default: the end of the bucket)")
	fs.BoolVar(&cfg.allowPartial, "allow-partial", false, "exit 0, with a warning, when the bucket does not hold all of the range")
	fs.StringVar(&cfg.format, "format", "raw", "raw (values), json (JSON lines) or kcat (kcat -J lines)")
	isolation := fs.String("isolation", "read_committed", "read_committed or read_uncommitted")
	toBrokers := fs.String("to-brokers", "", "produce the records into a running cluster (`host:port,...`) instead of printing them")
	fs.StringVar(&cfg.toTopic, "to-topic", "", "topic to produce into with --to-brokers (default: --topic)")
	positional, err := parseArgs(fs, args)
	if err != nil {
		return cfg, err
	}
	if len(positional) > 0 {
		return cfg, usageErrorf("unexpected arguments %q", positional)
	}
	if cfg.store == "" || cfg.topic == "" || *from == "" {
		return cfg, usageErrorf("--object-store, --topic and --from are required")
	}
	if cfg.from, err = parseReplayBound("from", *from); err != nil {
		return cfg, err
	}
	if *to != "" {
		if cfg.to, err = parseReplayBound("to", *to); err != nil {
			return cfg, err
		}
		if cfg.to.isTime == cfg.from.isTime && cfg.to.value < cfg.from.value {
			return cfg, usageErrorf("--to is before --from")
		}
	}
	if cfg.partitions, err = parsePartitionList(*parts); err != nil {
		return cfg, err
	}
	cfg.toBrokers = splitList(*toBrokers)
	if cfg.toTopic == "" {
		cfg.toTopic = cfg.topic
	}
	switch cfg.format {
	case "raw", "json", "kcat":
	default:
		return cfg, usageErrorf("--format %q: want raw, json or kcat", cfg.format)
	}
	switch *isolation {
	case "read_committed", "read_uncommitted":
		cfg.committed = *isolation == "read_committed"
	default:
		return cfg, usageErrorf("--isolation %q: want read_committed or read_uncommitted", *isolation)
	}
	return cfg, nil
}

func parsePartitionList(s string) ([]int32, error) {
	var out []int32
	for _, item := range splitList(s) {
		p, err := strconv.ParseInt(item, 10, 32)
		if err != nil || p < 0 {
			return nil, usageErrorf("--partitions: %q is not a partition", item)
		}
		out = append(out, int32(p))
	}
	return out, nil
}

func runReplay(ctx context.Context, c *cli, args []string) error {
	cfg, err := parseReplayArgs(c, args)
	if err != nil {
		return err
	}
	r, err := newReplayer(ctx, cfg, c)
	if err != nil {
		return err
	}
	if r.sink != nil {
		defer r.sink.close()
	}
	missing, err := r.run(ctx)
	if err != nil {
		return err
	}
	return replayOutcome(cfg, missing, c.stderr)
}

// replayer writes the records of one replay. Owned by runReplay's goroutine.
type replayer struct {
	cfg        replayConfig
	store      tier.ObjectStore
	topic      *tier.ReplayTopic
	partitions []int32 // ascending unless --partitions says otherwise
	out        *bufio.Writer
	stderr     io.Writer // the partitions' reports
	progress   *replayProgress
	plans      map[int32][]tier.ReplayPiece
	sink       *replayProducer // nil: print
	records    int64
	doneRead   int64 // bytes read by finished partitions
}

// newReplayer opens the bucket, finds the topic and its partitions, and
// connects to --to-brokers if given.
func newReplayer(ctx context.Context, cfg replayConfig, c *cli) (*replayer, error) {
	logger := slog.New(slog.NewTextHandler(c.stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	bucket, err := tier.OpenExistingURL(ctx, cfg.store, logger)
	if err != nil {
		return nil, usageErrorf("--object-store: %v", err)
	}
	var wanted func(int32) bool
	if cfg.partitions != nil {
		wanted = func(p int32) bool { return slices.Contains(cfg.partitions, p) }
	}
	topic, err := tier.FindReplayTopic(ctx, bucket, cfg.cluster, cfg.topic, cfg.topicID, wanted)
	if err != nil {
		return nil, err
	}
	r := &replayer{cfg: cfg, store: bucket, topic: topic, partitions: replayPartitions(cfg, topic, c.stderr),
		out: bufio.NewWriterSize(c.stdout, 256<<10), stderr: c.stderr, progress: newReplayProgress(c.stderr)}
	if len(cfg.toBrokers) > 0 {
		if r.sink, err = newReplayProducer(ctx, cfg.toBrokers, cfg.toTopic, r.partitions); err != nil {
			return nil, err
		}
	}
	return r, nil
}

// replayPartitions is --partitions, else every partition the bucket knows.
func replayPartitions(cfg replayConfig, topic *tier.ReplayTopic, stderr io.Writer) []int32 {
	if cfg.partitions != nil {
		return cfg.partitions
	}
	switch {
	case topic.FileErr != nil:
		fmt.Fprintf(stderr, "strata replay: %v: replaying the partitions that have objects\n", topic.FileErr)
	case topic.File == nil:
		fmt.Fprintf(stderr, "strata replay: the bucket has no topic.json for topic %s: replaying the partitions that have "+
			"objects (a partition without any is not known)\n", cfg.topic)
	}
	return topic.AllPartitionIDs()
}

// run replays every partition and returns what the requested range misses.
func (r *replayer) run(ctx context.Context) ([]string, error) {
	r.plan(r.partitions)
	var missing []string
	for _, p := range r.partitions {
		m, err := r.partition(ctx, p)
		if err != nil {
			r.out.Flush() // the records before the failure are good: keep them
			return nil, err
		}
		missing = append(missing, m...)
	}
	if r.sink != nil {
		if err := r.sink.flush(ctx); err != nil {
			return nil, err
		}
		fmt.Fprintf(r.out, "produced %d records into %s\n", r.records, r.cfg.toTopic)
	}
	r.progress.finish(r.records)
	return missing, r.out.Flush()
}

// plan chooses the objects of every partition and estimates the bytes to read.
func (r *replayer) plan(partitions []int32) {
	r.plans = map[int32][]tier.ReplayPiece{}
	var total int64
	for _, p := range partitions {
		r.plans[p] = tier.PlanReplay(r.topic.Partitions[p])
		for _, piece := range r.plans[p] {
			total += estimatePieceBytes(piece, r.cfg.from, r.cfg.to)
		}
	}
	r.progress.total = total
}

// estimatePieceBytes is the share of the piece's batches inside the offset
// bounds (the whole piece for time bounds), assuming even record sizes.
func estimatePieceBytes(p tier.ReplayPiece, from, to replayBound) int64 {
	lo, hi := p.From, p.To
	if from.set && !from.isTime {
		lo = max(lo, from.value)
	}
	if to.set && !to.isTime {
		hi = min(hi, to.value)
	}
	f := p.Object.Footer
	if hi < lo {
		return 0
	}
	span := float64(f.LastOffset-min(f.BaseOffset, p.From)) + 1
	return int64(float64(f.Sections[tier.SectionBatches].Length) * float64(hi-lo+1) / span)
}

// partition writes one partition's records, then its report line on
// stderr; it returns what the requested range misses there.
func (r *replayer) partition(ctx context.Context, p int32) ([]string, error) {
	served := servedRange{pastTo: -1}
	if objs := r.topic.Partitions[p]; len(objs) > 0 {
		var err error
		if served, err = r.replayPartition(ctx, p, objs); err != nil {
			return nil, err
		}
	}
	// Records before their report, when stdout and stderr share a terminal.
	if err := r.out.Flush(); err != nil {
		return nil, err
	}
	line, missing := reportPartition(r.cfg, r.topic.File, p, r.plans[p], served)
	r.progress.clear()
	fmt.Fprintf(r.stderr, "strata replay: %s\n", line)
	return missing, nil
}

// replayPartition writes the records of a partition that has objects.
func (r *replayer) replayPartition(ctx context.Context, p int32, objs []tier.ReplayObject) (servedRange, error) {
	opts, err := r.readOptions(ctx, objs)
	if err != nil {
		return servedRange{}, err
	}
	reader := tier.NewReplayReader(ctx, r.store, r.plans[p], opts)
	defer reader.Close()
	w := partitionWriter{r: r, partition: p, started: !r.cfg.from.isTime, served: servedRange{pastTo: -1}}
	for !w.done {
		b, err := reader.Next()
		if errors.Is(err, io.EOF) {
			r.reportHeld(p, reader)
			break
		}
		if err != nil {
			return w.served, err
		}
		if err := w.batch(b); err != nil {
			return w.served, err
		}
		r.progress.update(r.records, r.doneRead+reader.BytesRead())
	}
	r.doneRead += reader.BytesRead()
	return w.served, nil
}

// readOptions are the reader's options for a partition of objs.
func (r *replayer) readOptions(ctx context.Context, objs []tier.ReplayObject) (tier.ReplayOptions, error) {
	opts := tier.ReplayOptions{FromTime: -1, Committed: r.cfg.committed}
	if !r.cfg.from.isTime {
		opts.From = r.cfg.from.value
	} else {
		opts.FromTime = r.cfg.from.value
	}
	if r.cfg.committed {
		var err error
		if opts.Aborted, err = tier.ReplayAborted(ctx, r.store, objs, opts.From); err != nil {
			return opts, err
		}
	}
	return opts, nil
}

// reportHeld says where a read_committed replay stopped before --to.
func (r *replayer) reportHeld(p int32, reader *tier.ReplayReader) {
	off, held := reader.Held()
	if !held || (r.cfg.to.set && !r.cfg.to.isTime && off > r.cfg.to.value) {
		return
	}
	r.progress.clear()
	fmt.Fprintf(r.stderr, "strata replay: partition %d: stopped at offset %d: a transaction there has no "+
		"commit or abort marker in the bucket (still open, or its marker is not uploaded yet)\n", p, off)
}

// partitionWriter applies the bounds to one partition's records.
type partitionWriter struct {
	r         *replayer
	partition int32
	started   bool // a record at or after a time --from was seen
	done      bool // past --to
	served    servedRange
}

func (w *partitionWriter) batch(b tier.ReplayBatch) error {
	records, err := recordbatch.DecodeRecords(b.Data, replayMaxDecompressed)
	if err != nil {
		return fmt.Errorf("replay: partition %d batch at %d: %w", w.partition, b.Header.BaseOffset, err)
	}
	cfg := w.r.cfg
	for i := range records {
		rec := &records[i]
		offset, ts := recordPosition(b.Header, rec)
		if offset < b.From || offset > b.To || (!cfg.from.isTime && offset < cfg.from.value) {
			continue
		}
		if !w.started && ts < cfg.from.value {
			continue
		}
		w.started = true
		if cfg.to.set && ((cfg.to.isTime && ts > cfg.to.value) || (!cfg.to.isTime && offset > cfg.to.value)) {
			w.done, w.served.pastTo = true, offset
			return nil
		}
		if err := w.r.write(w.partition, offset, ts, b.Header.LogAppendTime(), rec); err != nil {
			return err
		}
		w.served.add(offset)
	}
	return nil
}

// recordPosition is a record's offset and timestamp in its batch (a
// LogAppendTime batch stamps every record with its maxTimestamp).
func recordPosition(h recordbatch.Header, rec *kmsg.Record) (offset, ts int64) {
	offset, ts = h.BaseOffset+int64(rec.OffsetDelta), h.FirstTimestamp+rec.TimestampDelta64
	if h.LogAppendTime() {
		ts = h.MaxTimestamp
	}
	return offset, ts
}

// write prints one record in the chosen format.
func (r *replayer) write(partition int32, offset, ts int64, logAppend bool, rec *kmsg.Record) error {
	r.records++
	if r.sink != nil {
		return r.sink.produce(partition, ts, rec)
	}
	switch r.cfg.format {
	case "raw":
		r.out.Write(rec.Value)
		return r.out.WriteByte('\n')
	case "json":
		return writeReplayJSON(r.out, r.cfg.topic, partition, offset, ts, rec)
	default:
		return writeReplayKcat(r.out, r.cfg.topic, partition, offset, ts, logAppend, rec)
	}
}

// replayJSONRecord is one line of --format json.
type replayJSONRecord struct {
	Topic     string             `json:"topic"`
	Partition int32              `json:"partition"`
	Offset    int64              `json:"offset"`
	Timestamp int64              `json:"timestamp"`
	Key       *string            `json:"key"`
	Value     *string            `json:"value"`
	Headers   []replayJSONHeader `json:"headers"`
}

type replayJSONHeader struct {
	Key   string  `json:"key"`
	Value *string `json:"value"`
}

// jsonBytes is b in base64, or nil for null.
func jsonBytes(b []byte) *string {
	if b == nil {
		return nil
	}
	v := base64.StdEncoding.EncodeToString(b)
	return &v
}

func writeReplayJSON(w *bufio.Writer, topic string, partition int32, offset, ts int64, rec *kmsg.Record) error {
	line := replayJSONRecord{Topic: topic, Partition: partition, Offset: offset, Timestamp: ts,
		Headers: make([]replayJSONHeader, 0, len(rec.Headers))}
	line.Key, line.Value = jsonBytes(rec.Key), jsonBytes(rec.Value)
	for _, h := range rec.Headers {
		line.Headers = append(line.Headers, replayJSONHeader{Key: h.Key, Value: jsonBytes(h.Value)})
	}
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	return enc.Encode(line) // Encode ends the line with "\n"
}

// writeReplayKcat writes kcat -C -J's line for the record. broker is -1:
// no broker served it.
func writeReplayKcat(w *bufio.Writer, topic string, partition int32, offset, ts int64, logAppend bool, rec *kmsg.Record) error {
	tstype := "create"
	if logAppend {
		tstype = "logappend"
	}
	fmt.Fprintf(w, `{"topic":%s,"partition":%d,"offset":%d,"tstype":"%s","ts":%d,"broker":-1`,
		kcatString([]byte(topic)), partition, offset, tstype, ts)
	if len(rec.Headers) > 0 {
		w.WriteString(`,"headers":[`)
		for i, h := range rec.Headers {
			if i > 0 {
				w.WriteByte(',')
			}
			w.WriteString(kcatString([]byte(h.Key)) + "," + kcatString(h.Value))
		}
		w.WriteByte(']')
	}
	w.WriteString(`,"key":` + kcatString(rec.Key) + `,"payload":` + kcatString(rec.Value) + "}\n")
	return nil
}

// kcatString quotes b as kcat's JSON writer (yajl) does: null for nil,
// '"', '\\' and control bytes escaped, other bytes (even invalid UTF-8) as is.
func kcatString(b []byte) string {
	if b == nil {
		return "null"
	}
	var sb strings.Builder
	sb.WriteByte('"')
	for _, c := range b {
		switch c {
		case '"':
			sb.WriteString(`\"`)
		case '\\':
			sb.WriteString(`\\`)
		case '\n':
			sb.WriteString(`\n`)
		case '\r':
			sb.WriteString(`\r`)
		case '\t':
			sb.WriteString(`\t`)
		case '\b':
			sb.WriteString(`\b`)
		case '\f':
			sb.WriteString(`\f`)
		default:
			if c < 0x20 {
				fmt.Fprintf(&sb, `\u%04X`, c)
			} else {
				sb.WriteByte(c)
			}
		}
	}
	sb.WriteByte('"')
	return sb.String()
}

// replayProgress draws "records, bytes / total, ETA" on a terminal's
// stderr, at most every 200ms; it is inert when stderr is not a terminal.
type replayProgress struct {
	w     io.Writer // nil: not a terminal
	total int64     // estimated bytes to read
	start time.Time
	last  time.Time
	bytes int64
}

func newReplayProgress(stderr io.Writer) *replayProgress {
	p := &replayProgress{start: time.Now()}
	if isTerminal(stderr) {
		p.w = stderr
	}
	return p
}

// isTerminal reports whether w is a terminal (TCGETS succeeds on its fd).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	_, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
	return err == nil
}

func (p *replayProgress) update(records, bytes int64) {
	p.bytes = bytes
	if p.w == nil || time.Since(p.last) < 200*time.Millisecond {
		return
	}
	p.last = time.Now()
	elapsed := time.Since(p.start)
	eta := "?"
	if bytes > 0 && p.total > bytes {
		eta = formatDuration(time.Duration(float64(elapsed) * float64(p.total-bytes) / float64(bytes)))
	}
	fmt.Fprintf(p.w, "\r\x1b[K%d records  %s / ~%s  %s/s  ETA %s", records, formatBytes(bytes), formatBytes(p.total),
		formatBytes(int64(float64(bytes)/max(elapsed.Seconds(), 0.001))), eta)
}

// clear erases the progress line before another line is written to stderr;
// the next update draws it again.
func (p *replayProgress) clear() {
	if p.w != nil {
		fmt.Fprint(p.w, "\r\x1b[K")
	}
}

func (p *replayProgress) finish(records int64) {
	if p.w != nil {
		fmt.Fprintf(p.w, "\r%d records  %s in %s            \n", records, formatBytes(p.bytes),
			time.Since(p.start).Round(time.Millisecond))
	}
}
