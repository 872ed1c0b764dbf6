package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Where `strata consume` starts in each partition, from --offset,
// --from-timestamp or --from-beginning (at most one; default: the end).
// Without a group the start is resolved to an exact offset per partition
// before consuming, so --exit-at-end knows which partitions have nothing to
// read; with a group it is only where partitions without a committed offset
// start.

type startKind int

const (
	startAtEnd    startKind = iota // the high watermark: only new records
	startAtStart                   // the log start offset
	startAtOffset                  // an absolute offset, kept within [log start, HW]
	startFromEnd                   // n before the HW, like kcat -o -n
	startAtTime                    // the first record stamped at or after n ms
)

type startSpec struct {
	kind startKind
	n    int64 // the offset, the count back from the HW, or the timestamp (ms)
}

// parseStart reads the start flags; more than one is a usage error.
func parseStart(offset, fromTimestamp string, fromBeginning bool) (startSpec, error) {
	given := 0
	for _, set := range []bool{offset != "", fromTimestamp != "", fromBeginning} {
		if set {
			given++
		}
	}
	switch {
	case given > 1:
		return startSpec{}, usageErrorf("give at most one of --offset, --from-timestamp and --from-beginning")
	case fromBeginning:
		return startSpec{kind: startAtStart}, nil
	case fromTimestamp != "":
		ms, err := parseTimestampMilli(fromTimestamp)
		return startSpec{kind: startAtTime, n: ms}, err
	case offset != "":
		return parseOffset(offset)
	}
	return startSpec{kind: startAtEnd}, nil
}

// parseOffset reads --offset: start, end, an offset N ≥ 0, or -N for N
// records before the end.
func parseOffset(s string) (startSpec, error) {
	switch s {
	case "start", "beginning":
		return startSpec{kind: startAtStart}, nil
	case "end":
		return startSpec{kind: startAtEnd}, nil
	}
	n, err := strconv.ParseInt(s, 10, 64)
	switch {
	case err != nil:
		return startSpec{}, usageErrorf("--offset %q: want start, end, an offset N or -N (N before the end)", s)
	case n < 0:
		return startSpec{kind: startFromEnd, n: -n}, nil
	}
	return startSpec{kind: startAtOffset, n: n}, nil
}

// parseTimestampMilli reads --from-timestamp: milliseconds since the
// epoch, or an RFC 3339 time.
func parseTimestampMilli(s string) (int64, error) {
	if ms, err := strconv.ParseInt(s, 10, 64); err == nil {
		if ms < 0 {
			return 0, usageErrorf("--from-timestamp %q: want milliseconds since the epoch ≥ 0 or an RFC 3339 time", s)
		}
		return ms, nil
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return 0, usageErrorf("--from-timestamp %q: want milliseconds since the epoch or an RFC 3339 time such as 2024-05-01T12:00:00Z", s)
	}
	return t.UnixMilli(), nil
}

// kgoOffset is the spec as a kgo offset, for group members: kgo resolves
// it for each partition that has no committed offset.
func (s startSpec) kgoOffset() kgo.Offset {
	switch s.kind {
	case startAtStart:
		return kgo.NewOffset().AtStart()
	case startAtOffset:
		return kgo.NewOffset().At(s.n)
	case startFromEnd:
		return kgo.NewOffset().AtEnd().Relative(-s.n)
	case startAtTime:
		return kgo.NewOffset().AfterMilli(s.n)
	}
	return kgo.NewOffset().AtEnd()
}

// partitionBounds are a partition's offsets as of the start: its log
// start, its high watermark, and (for startAtTime) the first offset
// stamped at or after the time, or the HW when there is none.
type partitionBounds struct {
	logStart, highWatermark, atTime int64
}

// resolve is the exact offset the spec starts at; always within
// [logStart, highWatermark].
func (s startSpec) resolve(b partitionBounds) int64 {
	var at int64
	switch s.kind {
	case startAtEnd:
		at = b.highWatermark
	case startAtStart:
		at = b.logStart
	case startAtOffset:
		at = s.n
	case startFromEnd:
		at = b.highWatermark - s.n
	case startAtTime:
		at = b.atTime
	}
	return min(max(at, b.logStart), b.highWatermark)
}

// listBounds asks for the bounds of the given partitions of topic (nil:
// every partition listed).
func listBounds(ctx context.Context, adm *kadm.Client, topic string, partitions []int32, spec startSpec) (map[int32]partitionBounds, error) {
	starts, err := adm.ListStartOffsets(ctx, topic)
	if err != nil {
		return nil, fmt.Errorf("list log start offsets of %s: %w", topic, err)
	}
	ends, err := adm.ListEndOffsets(ctx, topic)
	if err != nil {
		return nil, fmt.Errorf("list high watermarks of %s: %w", topic, err)
	}
	atTime := ends
	if spec.kind == startAtTime {
		if atTime, err = adm.ListOffsetsAfterMilli(ctx, spec.n, topic); err != nil {
			return nil, fmt.Errorf("list offsets of %s at %d ms: %w", topic, spec.n, err)
		}
	}
	if partitions == nil {
		ends.Each(func(o kadm.ListedOffset) {
			if o.Partition >= 0 { // -1 carries a missing topic's error
				partitions = append(partitions, o.Partition)
			}
		})
	}
	bounds := make(map[int32]partitionBounds, len(partitions))
	for _, p := range partitions {
		var b partitionBounds
		var errs []error
		for _, l := range []struct {
			offsets kadm.ListedOffsets
			into    *int64
		}{{starts, &b.logStart}, {ends, &b.highWatermark}, {atTime, &b.atTime}} {
			o, ok := l.offsets.Lookup(topic, p)
			if !ok {
				errs = append(errs, fmt.Errorf("no offsets listed"))
				continue
			}
			errs = append(errs, o.Err)
			*l.into = o.Offset
		}
		if err := errors.Join(errs...); err != nil {
			return nil, fmt.Errorf("topic %s partition %d: %w", topic, p, err)
		}
		if b.atTime < 0 { // no record at or after the time
			b.atTime = b.highWatermark
		}
		bounds[p] = b
	}
	return bounds, nil
}

// parsePartitions reads --partition: a comma-separated list of partition
// numbers, returned sorted without duplicates.
func parsePartitions(s string) ([]int32, error) {
	var out []int32
	for _, item := range strings.Split(s, ",") {
		p, err := strconv.ParseInt(strings.TrimSpace(item), 10, 32)
		if err != nil || p < 0 {
			return nil, usageErrorf("--partition %q: want partition numbers ≥ 0, comma-separated (e.g. 0,2)", s)
		}
		out = append(out, int32(p))
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}
