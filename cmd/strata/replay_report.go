package main

// The line `strata replay` writes on stderr after each partition: the
// offsets it wrote, where the bucket starts and ends, and which part of
// the requested range the bucket does not hold. The rule for what makes a
// range partial is in replay.go's doc comment. Everything here is pure.

import (
	"errors"
	"fmt"
	"io"
	"math"
	"strings"
	"time"

	"github.com/strata-log/strata/tier"
)

// errReplayPartial: some requested offsets or times are not in the bucket.
var errReplayPartial = errors.New("replay: the bucket does not hold all of the requested range")

// servedRange is what replay wrote of one partition.
type servedRange struct {
	written     bool  // at least one record was written
	first, last int64 // offsets of the first and last record written
	pastTo      int64 // offset of the first record read past --to; -1: none was read
}

func (s *servedRange) add(offset int64) {
	if !s.written {
		s.written, s.first = true, offset
	}
	s.last = offset
}

// replayFinding is one clause of a partition's line. missing, if set,
// names what of the requested range the bucket does not hold.
type replayFinding struct{ note, missing string }

// reportPartition returns partition p's line and what its requested range
// misses, each entry naming p. pieces is p's plan (nil: no objects).
func reportPartition(cfg replayConfig, file *tier.TopicFile, p int32, pieces []tier.ReplayPiece,
	s servedRange) (line string, missing []string) {
	ext, ok := tier.PlanExtent(pieces)
	if !ok {
		return joinFindings(p, []replayFinding{absentFinding(file, p)})
	}
	findings := []replayFinding{servedFinding(s), startFinding(cfg, ext),
		{note: fmt.Sprintf("the bucket ends at offset %d (%s)", ext.Last, bucketTime(ext.LastTime))}}
	findings = append(findings, holeFindings(cfg, pieces, ext, s)...)
	return joinFindings(p, append(findings, endFinding(cfg, ext, s)))
}

func joinFindings(p int32, findings []replayFinding) (string, []string) {
	var notes, missing []string
	for _, f := range findings {
		if f.note != "" {
			notes = append(notes, f.note)
		}
		if f.missing != "" {
			missing = append(missing, fmt.Sprintf("partition %d: %s", p, f.missing))
		}
	}
	return fmt.Sprintf("partition %d: %s", p, strings.Join(notes, "; ")), missing
}

// absentFinding: a partition with no objects misses whatever was asked of it.
func absentFinding(file *tier.TopicFile, p int32) replayFinding {
	if file != nil && p >= file.Partitions {
		return replayFinding{note: fmt.Sprintf("the bucket holds nothing of this partition (topic.json: the topic has %d partitions)",
			file.Partitions), missing: "not a partition of the topic"}
	}
	return replayFinding{note: "the bucket holds nothing of this partition", missing: "nothing in the bucket"}
}

func servedFinding(s servedRange) replayFinding {
	if !s.written {
		return replayFinding{note: "replayed nothing"}
	}
	return replayFinding{note: "replayed " + offsetsClause(s.first, s.last)}
}

// startFinding names where the bucket starts when that is after --from.
// --from 0 or a time asks for the beginning, wherever retention left it
// (as auto.offset.reset=earliest does); any other offset below the
// bucket's first is one Kafka answers OFFSET_OUT_OF_RANGE to: missing.
func startFinding(cfg replayConfig, ext tier.ReplayExtent) replayFinding {
	from := cfg.from
	if ext.First == 0 || (from.isTime && from.value >= ext.FirstTime) || (!from.isTime && from.value >= ext.First) {
		return replayFinding{}
	}
	f := replayFinding{note: fmt.Sprintf("the bucket starts at offset %d (%s)", ext.First, bucketTime(ext.FirstTime))}
	if !from.isTime && from.value > 0 {
		hi := ext.First - 1
		if cfg.to.set && !cfg.to.isTime {
			hi = min(hi, cfg.to.value)
		}
		f.missing = offsetsClause(from.value, hi) + ": before the bucket's start (deleted by retention, or never uploaded)"
	}
	return f
}

// endFinding compares --to with the bucket's end. Past its end the bucket
// cannot tell whether records exist (a hot tail never uploaded), so a --to
// beyond it is missing, unless a record past a time --to was read.
func endFinding(cfg replayConfig, ext tier.ReplayExtent, s servedRange) replayFinding {
	to := cfg.to
	switch {
	case !to.set:
		return replayFinding{note: "no --to: stopped at the bucket's end"}
	case !to.isTime && to.value > ext.Last:
		lo := ext.Last + 1
		if !cfg.from.isTime {
			lo = max(lo, cfg.from.value)
		}
		return replayFinding{note: fmt.Sprintf("--to %d is past it", to.value),
			missing: offsetsClause(lo, to.value) + ": past the bucket's end"}
	case to.isTime && s.pastTo < 0 && to.value > ext.LastTime:
		return replayFinding{note: fmt.Sprintf("--to %s is later than its last record", bucketTime(to.value)),
			missing: fmt.Sprintf("records after offset %d up to %s: the bucket ends at %s and cannot tell whether later records exist",
				ext.Last, bucketTime(to.value), bucketTime(ext.LastTime))}
	}
	return replayFinding{}
}

// holeFindings names the holes (offsets no object claims) inside the
// requested offsets.
func holeFindings(cfg replayConfig, pieces []tier.ReplayPiece, ext tier.ReplayExtent, s servedRange) []replayFinding {
	lo, hi := requestedSpan(cfg, pieces, s)
	var out []replayFinding
	for _, h := range ext.Holes {
		if a, b := max(h[0], lo), min(h[1], hi); a <= b {
			out = append(out, replayFinding{note: "a hole at " + offsetsClause(a, b) + " (no object holds it)",
				missing: offsetsClause(a, b) + ": a hole, no object of the bucket holds them"})
		}
	}
	return out
}

// requestedSpan is the offsets the bounds ask for, as far as the bucket
// tells: a time --from starts after the leading pieces whose objects'
// records all predate it (a hole after them may hold its first record),
// and a time --to ends before the first record read past it.
func requestedSpan(cfg replayConfig, pieces []tier.ReplayPiece, s servedRange) (lo, hi int64) {
	lo, hi = cfg.from.value, math.MaxInt64
	if cfg.from.isTime {
		lo = pieces[0].From
		for _, p := range pieces {
			if p.Object.Footer.MaxTimestamp >= cfg.from.value {
				break
			}
			lo = p.To + 1
		}
	}
	switch {
	case cfg.to.set && !cfg.to.isTime:
		hi = cfg.to.value
	case s.pastTo >= 0:
		hi = s.pastTo - 1
	}
	return lo, hi
}

// replayOutcome makes a partial range an error, or with --allow-partial a
// warning; the records were written either way.
func replayOutcome(cfg replayConfig, missing []string, stderr io.Writer) error {
	if len(missing) == 0 {
		return nil
	}
	list := "\n  " + strings.Join(missing, "\n  ")
	if cfg.allowPartial {
		fmt.Fprintf(stderr, "strata replay: warning (--allow-partial): the bucket does not hold all of the requested range:%s\n", list)
		return nil
	}
	return fmt.Errorf("%w; what it holds was written (--allow-partial accepts a partial range):%s", errReplayPartial, list)
}

func offsetsClause(lo, hi int64) string {
	if lo == hi {
		return fmt.Sprintf("offset %d", lo)
	}
	return fmt.Sprintf("offsets %d-%d", lo, hi)
}

// bucketTime is a record timestamp (Unix ms) in RFC 3339, UTC.
func bucketTime(ms int64) string {
	return time.UnixMilli(ms).UTC().Format(time.RFC3339Nano)
}
