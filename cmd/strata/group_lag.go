package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strata-log/strata/lag"
)

// The client-side view of consumer-group lag and retention margins behind
// `strata group lag`, and the RETENTION columns of `group describe` and
// `group list`. Everything comes from ordinary Kafka requests (OffsetFetch,
// ListOffsets, DescribeConfigs, Fetch), so it works against any broker a
// client can reach; the lag package does the arithmetic. What a client
// cannot see bounds it: segment boundaries (the time margin is measured
// from the record at the committed offset, a lower bound) and the log's
// bytes (the size rule is left out). The broker's own lag monitor, on
// /metrics, sees both.

// lagStampTimeout bounds the one fetch that reads the record at each
// committed offset: a partition whose record has not arrived by then shows
// "?" rather than holding up the whole table.
const lagStampTimeout = 5 * time.Second

// Kafka's topic defaults, for a broker whose DescribeConfigs omits a key.
const (
	defaultRetentionMs    = 7 * 24 * 60 * 60 * 1000
	defaultRetentionBytes = -1
)

const groupLagHelp = `usage: strata group lag [--json] [--brokers host:port,...] [GROUP...]

One row per partition of each named group (no names: every group in the
cluster), sorted by group, topic, partition:

  COMMITTED  the group's committed offset (- when it has none)
  END        the partition's end offset (high watermark)
  LAG        records between the two
  LAG-TIME   now minus the timestamp of the record at the committed offset;
             - when caught up, ? when that record was not read within 5s
  RETENTION  how long until retention deletes the record at the committed
             offset, by retention.ms:
               loses data in 5h12m              retention.ms deletes the record in at least this
                                                long (see Limits)
               LOST (offset below log start N)  retention deleted records the group did not read
               size-limited                     only retention.bytes applies (no retention.ms)
               -                                no retention limit (cleanup.policy without
                                                delete, or both limits -1), or nothing committed
               ?                                unknown (configs or the record not readable)

Limits. This is computed client side: a client cannot see segment
boundaries, so the time is measured from the timestamp of the record at the
committed offset, which is at most the newest timestamp of its segment (the
one retention.ms goes by): by retention.ms the record lives at least as long
as shown, possibly longer. A client cannot see the log's bytes (local and in the bucket)
either, so retention.bytes is left out: a topic that sets both limits may
lose data sooner by size, and one with only retention.bytes shows
size-limited. The broker's /metrics (strata_consumergroup_retention_margin_seconds)
account for segments and bytes.

--json prints an array of objects: group, topic, partition, committed (null
when nothing is committed), end, log_start, lag, lag_seconds (null when
unknown), retention_margin_seconds (0 when lost; null when there is no time
limit or it is unknown), lost, retention (the RETENTION text) and error (when
the partition's offsets could not be listed).

Flags:
`

// groupLag prints the lag and retention margin of every partition of the
// named groups, or of every group.
func groupLag(ctx context.Context, c *cli, args []string) error {
	fs := newFlagSet("group lag [GROUP...]", c)
	open := groupClientFlags(fs, c)
	asJSON := fs.Bool("json", false, "print a JSON array instead of a table")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), groupLagHelp)
		fs.PrintDefaults()
	}
	names, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	cl, adm, err := open()
	if err != nil {
		return err
	}
	defer cl.Close()
	if len(names) == 0 {
		// Not adm.Lag with no names: that describes classic groups only.
		listed, err := adm.ListGroups(ctx)
		if err != nil {
			return err
		}
		names = listed.Groups()
	}
	var lags kadm.DescribedGroupLags
	if len(names) > 0 {
		if lags, err = adm.Lag(ctx, names...); err != nil {
			return err
		}
	}
	rows := gatherLag(ctx, c.stderr, cl, adm, lags)
	if *asJSON {
		err = printLagJSON(c.stdout, rows)
	} else {
		err = printLagTable(c.stdout, rows)
	}
	return errors.Join(err, groupErrors(lags))
}

// groupErrors names the groups that could not be described or whose
// offsets could not be fetched (their rows are missing).
func groupErrors(lags kadm.DescribedGroupLags) error {
	var errs []error
	for _, l := range lags.Sorted() {
		if err := l.Error(); err != nil {
			errs = append(errs, fmt.Errorf("group %s: %w", l.Group, err))
		}
	}
	return errors.Join(errs...)
}

// gatherLag reads what rows need beyond lags (topic configs, the record at
// each committed offset) and builds the rows of the groups without an
// error. A failed read is a warning on warn and shows as "?" in its rows:
// margins are an addition to describe and list, never a reason to fail.
func gatherLag(ctx context.Context, warn io.Writer, cl *kgo.Client, adm *kadm.Client, lags kadm.DescribedGroupLags) []lagRow {
	parts := groupPartitions(lags)
	retention, err := describeRetention(ctx, adm, partitionTopics(parts))
	if err != nil {
		fmt.Fprintf(warn, "strata: retention margins unknown: reading topic configs: %v\n", err)
	}
	stamps, err := recordStamps(ctx, cl, stampWants(parts), lagStampTimeout)
	if err != nil {
		fmt.Fprintf(warn, "strata: lag times unknown: %v\n", err)
	}
	return lagRows(parts, retention, stamps, time.Now())
}

// groupPartition is what kadm.Lag tells of one partition of a group.
type groupPartition struct {
	Group     string
	Topic     string
	Partition int32
	Committed int64 // -1: the group has committed nothing here
	LogStart  int64
	End       int64 // the high watermark
	// KadmLag is kadm's lag, the one used when nothing is committed (the
	// records from the log start); -1 with Err.
	KadmLag int64
	Err     error // the offsets could not be fetched or listed
}

// groupPartitions flattens the partitions of every group described
// without an error, sorted by group, topic, partition.
func groupPartitions(lags kadm.DescribedGroupLags) []groupPartition {
	var out []groupPartition
	for _, l := range lags.Sorted() {
		if l.Error() != nil {
			continue
		}
		for _, p := range l.Lag.Sorted() {
			out = append(out, groupPartition{
				Group: l.Group, Topic: p.Topic, Partition: p.Partition,
				Committed: p.Commit.At, LogStart: p.Start.Offset, End: p.End.Offset,
				KadmLag: p.Lag, Err: cmp.Or(p.Err, p.Start.Err),
			})
		}
	}
	return out
}

func partitionTopics(parts []groupPartition) []string {
	var topics []string
	for _, p := range parts {
		topics = append(topics, p.Topic)
	}
	slices.Sort(topics)
	return slices.Compact(topics)
}

// topicRetention is a topic's retention configs.
type topicRetention struct {
	Delete bool  // cleanup.policy includes delete
	Ms     int64 // retention.ms; negative: no time limit
	Bytes  int64 // retention.bytes; negative: no size limit
}

// describeRetention reads the retention configs of topics in one
// DescribeConfigs request per broker. A topic whose configs could not be
// read is missing from the map.
func describeRetention(ctx context.Context, adm *kadm.Client, topics []string) (map[string]topicRetention, error) {
	out := map[string]topicRetention{}
	if len(topics) == 0 {
		return out, nil
	}
	configs, err := adm.DescribeTopicConfigs(ctx, topics...)
	if se, ok := errors.AsType[*kadm.ShardErrors](err); ok && !se.AllFailed {
		err = nil // the topics of the failed shards are missing below
	}
	for _, rc := range configs {
		if rc.Err == nil {
			out[rc.Name] = parseRetention(rc.Configs)
		}
	}
	return out, err
}

// parseRetention reads cleanup.policy, retention.ms and retention.bytes;
// a key that is missing or unparsable keeps Kafka's default.
func parseRetention(configs []kadm.Config) topicRetention {
	r := topicRetention{Delete: true, Ms: defaultRetentionMs, Bytes: defaultRetentionBytes}
	for _, c := range configs {
		if c.Value == nil {
			continue
		}
		switch c.Key {
		case "cleanup.policy":
			r.Delete = slices.Contains(splitList(*c.Value), "delete")
		case "retention.ms":
			r.Ms = parseLongOr(*c.Value, r.Ms)
		case "retention.bytes":
			r.Bytes = parseLongOr(*c.Value, r.Bytes)
		}
	}
	return r
}

func parseLongOr(s string, fallback int64) int64 {
	v, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
	if err != nil {
		return fallback
	}
	return v
}

type topicPartition struct {
	Topic     string
	Partition int32
}

// stampKey names the record whose timestamp is wanted: the first at or
// after Offset in a partition.
type stampKey struct {
	topicPartition
	Offset int64
}

// stampOffset is where to read the record that dates p's committed
// offset: the committed offset, or the log start when retention deleted it
// (the oldest record the group has not read). ok is false when there is
// nothing to read: p is caught up, has no commit, or has an error.
func stampOffset(p groupPartition) (offset int64, ok bool) {
	if p.Err != nil || p.Committed < 0 {
		return 0, false
	}
	offset = max(p.Committed, p.LogStart)
	return offset, offset < p.End
}

// stampWants lists, per partition, the distinct offsets to read a record
// at, ascending (several groups may read one partition).
func stampWants(parts []groupPartition) map[topicPartition][]int64 {
	wants := map[topicPartition][]int64{}
	for _, p := range parts {
		if off, ok := stampOffset(p); ok {
			tp := topicPartition{p.Topic, p.Partition}
			wants[tp] = append(wants[tp], off)
		}
	}
	for tp, offs := range wants {
		slices.Sort(offs)
		wants[tp] = slices.Compact(offs)
	}
	return wants
}

// recordStamps reads the timestamp (unix ms) of the first record at or
// after each wanted offset with one direct consumer of every wanted
// partition, starting each at its lowest offset and jumping ahead to the
// next once a record answered the ones before. What has not arrived after
// timeout is missing from the map.
func recordStamps(ctx context.Context, base *kgo.Client, wants map[topicPartition][]int64, timeout time.Duration) (map[stampKey]int64, error) {
	stamps := map[stampKey]int64{}
	if len(wants) == 0 {
		return stamps, nil
	}
	start := map[string]map[int32]kgo.Offset{}
	pending := map[topicPartition][]int64{}
	for tp, offs := range wants {
		if start[tp.Topic] == nil {
			start[tp.Topic] = map[int32]kgo.Offset{}
		}
		start[tp.Topic][tp.Partition] = kgo.NewOffset().At(offs[0])
		pending[tp] = offs
	}
	// The base client's options carry its brokers (and whatever security
	// it was given); the consumer adds only what to read.
	opts := append(slices.Clone(base.Opts()), kgo.ConsumePartitions(start), kgo.FetchMaxWait(time.Second))
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return stamps, err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for len(pending) > 0 && ctx.Err() == nil {
		jumps := map[string]map[int32]kgo.EpochOffset{}
		done := map[string][]int32{}
		cl.PollFetches(ctx).EachPartition(func(fp kgo.FetchTopicPartition) {
			tp := topicPartition{fp.Topic, fp.Partition}
			offs, ok := pending[tp]
			if !ok || len(fp.Records) == 0 {
				return // errors too: kgo retries, or the partition shows "?"
			}
			offs = resolveStamps(tp, offs, fp.Records, stamps)
			last := fp.Records[len(fp.Records)-1].Offset
			switch {
			case len(offs) == 0:
				delete(pending, tp)
				done[tp.Topic] = append(done[tp.Topic], tp.Partition)
			case offs[0] > last+1: // skip the records between
				if jumps[tp.Topic] == nil {
					jumps[tp.Topic] = map[int32]kgo.EpochOffset{}
				}
				jumps[tp.Topic][tp.Partition] = kgo.EpochOffset{Epoch: -1, Offset: offs[0]}
				pending[tp] = offs
			default:
				pending[tp] = offs
			}
		})
		cl.PauseFetchPartitions(done)
		cl.SetOffsets(jumps)
	}
	return stamps, nil
}

// resolveStamps records, for each pending offset (ascending), the
// timestamp of the first of records (one partition's, in offset order) at
// or after it, and returns the offsets still pending. Records below every
// pending offset (buffered before a jump) answer nothing; a record past
// several pending offsets answers them all, as there was no record
// between.
func resolveStamps(tp topicPartition, pending []int64, records []*kgo.Record, stamps map[stampKey]int64) []int64 {
	for _, r := range records {
		for len(pending) > 0 && pending[0] <= r.Offset {
			stamps[stampKey{tp, pending[0]}] = r.Timestamp.UnixMilli()
			pending = pending[1:]
		}
	}
	return pending
}

// retentionKind orders margins by urgency: a smaller kind is worse.
type retentionKind int

const (
	retentionLost    retentionKind = iota // committed offset below the log start
	retentionTime                         // retention.ms deletes it in Seconds at the earliest
	retentionUnknown                      // configs or the record could not be read
	retentionSize                         // only retention.bytes applies; its margin needs the log's bytes
	retentionNone                         // no retention limit, or nothing committed: no loss ahead
)

// retentionMargin is the client's view of how long until retention
// deletes the record at a group's committed offset.
type retentionMargin struct {
	Kind     retentionKind
	Seconds  float64 // retentionTime
	LogStart int64   // retentionLost
}

// String is the RETENTION column of group lag and describe.
func (m retentionMargin) String() string {
	if m.Kind == retentionLost {
		return fmt.Sprintf("LOST (offset below log start %d)", m.LogStart)
	}
	return m.summary()
}

// summary is the RETENTION column of group list, where LOST needs no
// offset (the group has several partitions).
func (m retentionMargin) summary() string {
	switch m.Kind {
	case retentionLost:
		return "LOST"
	case retentionTime:
		return "loses data in " + compactDuration(secondsDuration(m.Seconds))
	case retentionSize:
		return "size-limited"
	case retentionNone:
		return "-"
	default:
		return "?"
	}
}

// moreUrgent reports whether a comes before b: a worse kind, or the same
// time-limited kind with less time left.
func (m retentionMargin) moreUrgent(b retentionMargin) bool {
	if m.Kind != b.Kind {
		return m.Kind < b.Kind
	}
	return m.Kind == retentionTime && m.Seconds < b.Seconds
}

// lagRow is one partition of one group, computed.
type lagRow struct {
	groupPartition
	Records int64 // -1 with Err
	// LagSeconds is how far behind in time the group is; LagKnown is false
	// when the record at the committed offset was not read (or there is no
	// commit). Caught up is known, 0.
	LagSeconds float64
	LagKnown   bool
	Margin     retentionMargin
}

// lagRows computes the rows of parts from the topics' retention configs
// (a topic missing: unknown) and the record timestamps read at stampOffset
// (missing: not read) as of now. It is pure.
func lagRows(parts []groupPartition, retention map[string]topicRetention, stamps map[stampKey]int64, now time.Time) []lagRow {
	rows := make([]lagRow, 0, len(parts))
	for _, p := range parts {
		cfg, cfgOK := retention[p.Topic]
		var stamp int64
		stampOK := false
		if off, ok := stampOffset(p); ok {
			stamp, stampOK = stamps[stampKey{topicPartition{p.Topic, p.Partition}, off}]
		}
		rows = append(rows, newLagRow(p, cfg, cfgOK, stamp, stampOK, now))
	}
	return rows
}

func newLagRow(p groupPartition, cfg topicRetention, cfgOK bool, stamp int64, stampOK bool, now time.Time) lagRow {
	r := lagRow{groupPartition: p, Records: p.KadmLag, Margin: retentionMargin{Kind: retentionUnknown}}
	switch {
	case p.Err != nil:
		return r
	case p.Committed < 0:
		r.Margin.Kind = retentionNone
		return r
	}
	r.Records = lag.Records(p.Committed, p.End)
	if r.Records == 0 || stampOK {
		r.LagSeconds, r.LagKnown = lag.Seconds(p.Committed, p.End, stamp, now), true
	}
	if cfgOK {
		r.Margin = clientMargin(p, cfg, stamp, stampOK, now)
	}
	return r
}

// clientMargin is lag.RetentionMargin over what a client sees of p: one
// segment covering [committed, end) whose newest timestamp is that of the
// record at the committed offset. That record's timestamp is at most its
// real segment's newest, so the time margin is a lower bound. The log's
// bytes are unseen, so the size rule is left out (RetentionBytes -1)
// unless it is the only rule, and then only its Lost and Limited are used.
func clientMargin(p groupPartition, cfg topicRetention, stamp int64, stampOK bool, now time.Time) retentionMargin {
	part := lag.Partition{LogStart: p.LogStart, HighWatermark: p.End, Delete: cfg.Delete, RetentionMs: cfg.Ms, RetentionBytes: -1}
	if cfg.Ms < 0 {
		part.RetentionBytes = cfg.Bytes
	}
	behind := p.Committed < p.End
	if behind && stampOK {
		part.Segments = []lag.Segment{{BaseOffset: p.Committed, LastOffset: p.End - 1, MaxTimestamp: stamp}}
	}
	m := lag.RetentionMargin(part, p.Committed, now)
	switch {
	case m.Lost:
		return retentionMargin{Kind: retentionLost, LogStart: p.LogStart}
	case !m.Limited:
		return retentionMargin{Kind: retentionNone}
	case cfg.Ms < 0:
		return retentionMargin{Kind: retentionSize}
	case behind && !stampOK:
		return retentionMargin{Kind: retentionUnknown}
	default:
		return retentionMargin{Kind: retentionTime, Seconds: m.Seconds}
	}
}

// mostUrgent is each group's most urgent margin over its rows; a group
// with no rows has none.
func mostUrgent(rows []lagRow) map[string]retentionMargin {
	out := map[string]retentionMargin{}
	for _, r := range rows {
		if cur, ok := out[r.Group]; !ok || r.Margin.moreUrgent(cur) {
			out[r.Group] = r.Margin
		}
	}
	return out
}

// lagTime is the LAG-TIME column.
func (r lagRow) lagTime() string {
	switch {
	case r.Err != nil:
		return "?"
	case r.Committed < 0 || r.Records == 0:
		return "-"
	case !r.LagKnown:
		return "?"
	}
	return compactDuration(secondsDuration(r.LagSeconds))
}

func (r lagRow) committedText() string {
	if r.Committed < 0 {
		return "-"
	}
	return strconv.FormatInt(r.Committed, 10)
}

// endAndLag are the END and LAG columns, "?" when the offsets could not be
// listed.
func (r lagRow) endAndLag() (string, string) {
	if r.Err != nil {
		return "?", "?"
	}
	return strconv.FormatInt(r.End, 10), strconv.FormatInt(r.Records, 10)
}

func printLagTable(w io.Writer, rows []lagRow) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "GROUP\tTOPIC\tPARTITION\tCOMMITTED\tEND\tLAG\tLAG-TIME\tRETENTION")
	for _, r := range rows {
		end, records := r.endAndLag()
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%s\t%s\t%s\n",
			r.Group, r.Topic, r.Partition, r.committedText(), end, records, r.lagTime(), r.Margin)
	}
	return tw.Flush()
}

// lagJSON is one element of `group lag --json`.
type lagJSON struct {
	Group                  string   `json:"group"`
	Topic                  string   `json:"topic"`
	Partition              int32    `json:"partition"`
	Committed              *int64   `json:"committed"` // null: nothing committed
	End                    int64    `json:"end"`
	LogStart               int64    `json:"log_start"`
	Lag                    int64    `json:"lag"`
	LagSeconds             *float64 `json:"lag_seconds"`              // null: unknown
	RetentionMarginSeconds *float64 `json:"retention_margin_seconds"` // null: no time limit, or unknown
	Lost                   bool     `json:"lost"`
	Retention              string   `json:"retention"`
	Error                  string   `json:"error,omitempty"`
}

func (r lagRow) json() lagJSON {
	j := lagJSON{
		Group: r.Group, Topic: r.Topic, Partition: r.Partition,
		End: r.End, LogStart: r.LogStart, Lag: r.Records,
		Lost: r.Margin.Kind == retentionLost, Retention: r.Margin.String(),
	}
	if r.Committed >= 0 {
		j.Committed = &r.Committed
	}
	if r.LagKnown {
		j.LagSeconds = &r.LagSeconds
	}
	switch r.Margin.Kind {
	case retentionTime:
		j.RetentionMarginSeconds = &r.Margin.Seconds
	case retentionLost:
		j.RetentionMarginSeconds = new(float64) // gone already: no time left
	}
	if r.Err != nil {
		j.Error = r.Err.Error()
	}
	return j
}

func printLagJSON(w io.Writer, rows []lagRow) error {
	out := make([]lagJSON, 0, len(rows)) // [] rather than null when empty
	for _, r := range rows {
		out = append(out, r.json())
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(out)
}

// secondsDuration converts seconds to a Duration, saturating (the size
// rule's margin may be +Inf).
func secondsDuration(s float64) time.Duration {
	if !(s < float64(math.MaxInt64)/float64(time.Second)) {
		return math.MaxInt64
	}
	return time.Duration(s * float64(time.Second))
}

// compactDuration prints d in its two largest units, truncated (a lower
// bound stays one): 45s, 3m12s, 5h12m, and days from 48h on, 2d3h.
// Negative durations print as 0s.
func compactDuration(d time.Duration) string {
	const day = 24 * time.Hour
	d = max(d, 0)
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds", d/time.Second)
	case d < time.Hour:
		return fmt.Sprintf("%dm%ds", d/time.Minute, d%time.Minute/time.Second)
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh%dm", d/time.Hour, d%time.Hour/time.Minute)
	default:
		return fmt.Sprintf("%dd%dh", d/day, d%day/time.Hour)
	}
}
