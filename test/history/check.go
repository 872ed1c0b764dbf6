package history

import (
	"errors"
	"fmt"
	"sort"
	"strings"
)

// Kind names an anomaly (see the package doc).
type Kind string

const (
	LostWrite           Kind = "lost-write"
	Duplicate           Kind = "duplicate"
	InconsistentOffsets Kind = "inconsistent-offsets"
	NonmonotonicPoll    Kind = "nonmonotonic-poll"
	PollSkip            Kind = "poll-skip"
	Reorder             Kind = "reorder"
	PhantomWrite        Kind = "phantom-write"
	AbortedRead         Kind = "aborted-read"
	TornTransaction     Kind = "torn-transaction"
	OffsetRegression    Kind = "offset-regression"
	GroupMissed         Kind = "group-missed"
)

// Kinds lists every anomaly kind in report order.
var Kinds = []Kind{LostWrite, Duplicate, InconsistentOffsets, NonmonotonicPoll, PollSkip, Reorder, PhantomWrite,
	AbortedRead, TornTransaction, OffsetRegression, GroupMissed}

// maxExamples bounds the anomalies kept per kind; Counts has the totals.
const maxExamples = 100

// errExamples is how many examples per kind Err prints.
const errExamples = 5

// Anomaly is one violation found by Check.
type Anomaly struct {
	Kind      Kind
	Partition int32
	Offset    int64
	Value     string
	Detail    string
}

func (a Anomaly) String() string {
	return fmt.Sprintf("%s p%d@%d %q: %s", a.Kind, a.Partition, a.Offset, a.Value, a.Detail)
}

// Stats counts what the history holds. Acked counts acknowledged writes,
// transactional ones too whatever their transaction's outcome;
// CommittedRecords counts the acknowledged writes of committed
// transactions.
type Stats struct {
	Attempts, Acked, Failed, Unknown     int
	Observations                         int
	FinalRecords                         int
	TxnCommitted, TxnAborted, TxnUnknown int
	CommittedRecords                     int
}

// Report is Check's result.
type Report struct {
	Stats     Stats
	Counts    map[Kind]int
	Anomalies []Anomaly // at most maxExamples per kind, sorted by kind, partition, offset
}

// OK says no anomaly was found.
func (r Report) OK() bool { return len(r.Anomalies) == 0 }

// Of returns the kept anomalies of one kind.
func (r Report) Of(k Kind) []Anomaly {
	var out []Anomaly
	for _, a := range r.Anomalies {
		if a.Kind == k {
			out = append(out, a)
		}
	}
	return out
}

// ErrAnomalies is wrapped by Report.Err.
var ErrAnomalies = errors.New("history: anomalies found")

// Err is nil for a clean history, else an error naming every kind found
// with its count and examples.
func (r Report) Err() error {
	if r.OK() {
		return nil
	}
	var b strings.Builder
	for _, k := range Kinds {
		if r.Counts[k] == 0 {
			continue
		}
		fmt.Fprintf(&b, "\n  %s: %d", k, r.Counts[k])
		for i, a := range r.Of(k) {
			if i == errExamples {
				break
			}
			fmt.Fprintf(&b, "\n    %s", a)
		}
	}
	return fmt.Errorf("%w (%s):%s", ErrAnomalies, r.Stats, b.String())
}

func (s Stats) String() string {
	return fmt.Sprintf("%d attempts: %d acked, %d failed, %d unknown; %d observations; %d records in final reads%s",
		s.Attempts, s.Acked, s.Failed, s.Unknown, s.Observations, s.FinalRecords, s.txnString())
}

// Input is a recorded history (History.Snapshot).
type Input struct {
	Attempts     []Attempt
	Observations []Observation
	Final        map[int32]FinalLog
	Txns         map[string]TxnOutcome // by transaction named in Attempt.Txn
	Commits      []Commit              // in recording order
}

// position is one (partition, offset).
type position struct {
	partition int32
	offset    int64
}

// checker holds the indexes one Check builds.
type checker struct {
	in       Input
	finalAt  map[position]string
	finalPos map[string][]position // value -> its positions in the final reads
	attempts map[string]*Attempt
	report   Report
}

// Check finds every anomaly of the history. It does not modify in.
func Check(in Input) Report {
	c := &checker{in: in, finalAt: map[position]string{}, finalPos: map[string][]position{}, attempts: map[string]*Attempt{},
		report: Report{Counts: map[Kind]int{}}}
	c.index()
	c.checkLost()
	c.checkPositions()
	c.checkSessions()
	c.checkReorder()
	c.checkPhantoms()
	c.checkTxns()
	c.checkCommits()
	c.checkGroupCoverage()
	c.txnStats()
	sort.SliceStable(c.report.Anomalies, func(i, j int) bool {
		a, b := c.report.Anomalies[i], c.report.Anomalies[j]
		if a.Kind != b.Kind {
			return kindRank(a.Kind) < kindRank(b.Kind)
		}
		if a.Partition != b.Partition {
			return a.Partition < b.Partition
		}
		return a.Offset < b.Offset
	})
	return c.report
}

func kindRank(k Kind) int {
	for i, x := range Kinds {
		if x == k {
			return i
		}
	}
	return len(Kinds)
}

func (c *checker) add(k Kind, p int32, offset int64, value, format string, args ...any) {
	c.report.Counts[k]++
	if c.report.Counts[k] <= maxExamples {
		c.report.Anomalies = append(c.report.Anomalies, Anomaly{k, p, offset, value, fmt.Sprintf(format, args...)})
	}
}

func (c *checker) index() {
	s := &c.report.Stats
	for i := range c.in.Attempts {
		a := &c.in.Attempts[i]
		c.attempts[a.Value] = a
		s.Attempts++
		switch a.Outcome {
		case Acked:
			s.Acked++
		case Failed:
			s.Failed++
		default:
			s.Unknown++
		}
	}
	s.Observations = len(c.in.Observations)
	for p, f := range c.in.Final {
		s.FinalRecords += len(f.Records)
		for _, r := range f.Records {
			c.finalAt[position{p, r.Offset}] = r.Value
			c.finalPos[r.Value] = append(c.finalPos[r.Value], position{p, r.Offset})
		}
	}
}

// logStart is the first offset the final read of p can vouch for.
func (c *checker) logStart(p int32) int64 { return c.in.Final[p].LogStart }
