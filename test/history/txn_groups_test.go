package history

import (
	"fmt"
	"strings"
	"testing"
)

// txnHistory records three transactions of two records each on partition
// 0, one per outcome, each record acknowledged at its own offset (t1 at 0-1
// and its marker at 2, t2 at 3-4 and 5, t3 at 6-7 and 8), and a
// read_committed final read (and, if observe, a session) that show exactly
// the committed one and, as outcome unknown allows, the unknown one in
// full.
func txnHistory(observe bool) *History {
	h := New()
	offset := int64(0)
	var final []Record
	for _, tc := range []struct {
		txn     string
		outcome TxnOutcome
		visible bool
	}{{"t1", TxnCommitted, true}, {"t2", TxnAborted, false}, {"t3", TxnUnknown, true}} {
		for i := 0; i < 2; i++ {
			v := fmt.Sprintf("%s-r%d", tc.txn, i)
			h.ProduceTxn("txp", tc.txn, v, "k", 0)
			h.Ack(v, 0, offset)
			if tc.visible && observe {
				h.Observe("rc", 0, offset, v)
			}
			if tc.visible {
				final = append(final, Record{offset, v})
			}
			offset++
		}
		h.EndTxn(tc.txn, tc.outcome)
		offset++ // the transaction marker
	}
	h.Final(0, 0, final)
	return h
}

func TestTxnHistoryCleanPasses(t *testing.T) {
	r := txnHistory(true).Check()
	if err := r.Err(); err != nil {
		t.Fatalf("clean transactional history: %v", err)
	}
	s := r.Stats
	if s.TxnCommitted != 1 || s.TxnAborted != 1 || s.TxnUnknown != 1 || s.CommittedRecords != 2 || s.Acked != 6 {
		t.Fatalf("stats %+v", s)
	}
	if !strings.Contains(s.String(), "1 committed (2 records), 1 aborted, 1 unknown") {
		t.Fatalf("stats string %q", s)
	}
}

// An unknown transaction may also be invisible in full; an aborted one's
// records not being read is not a lost write.
func TestTxnUnknownInvisiblePasses(t *testing.T) {
	h := txnHistory(false)
	h.Final(0, 0, []Record{{0, "t1-r0"}, {1, "t1-r1"}})
	if err := h.Check().Err(); err != nil {
		t.Fatal(err)
	}
}

func TestTxnAnomaliesDetected(t *testing.T) {
	for _, tc := range []struct {
		name    string
		observe bool // a read_committed session too
		mutate  func(h *History)
		want    Kind
		detail  string
	}{
		{"aborted record in the final read", false, func(h *History) {
			h.Final(0, 0, []Record{{0, "t1-r0"}, {1, "t1-r1"}, {3, "t2-r0"}, {6, "t3-r0"}, {7, "t3-r1"}})
		}, AbortedRead, "transaction t2, which aborted"},
		{"aborted record seen by a consumer", true, func(h *History) {
			h.Observe("rc2", 0, 4, "t2-r1")
		}, AbortedRead, "session rc2"},
		{"committed record missing", false, func(h *History) {
			h.Final(0, 0, []Record{{0, "t1-r0"}, {6, "t3-r0"}, {7, "t3-r1"}})
		}, LostWrite, "acknowledged to txp"},
		{"unknown transaction half visible", false, func(h *History) {
			h.Final(0, 0, []Record{{0, "t1-r0"}, {1, "t1-r1"}, {7, "t3-r1"}})
		}, TornTransaction, "1 of its 2 records"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := txnHistory(tc.observe)
			tc.mutate(h)
			expectOnly(t, h.Check(), tc.want, tc.detail)
		})
	}
}

// groupHistory: 6 acknowledged records on partition 0, read by group g
// through two members (the second one's session starts where the first
// one's committed offset left it, re-reading offset 3), committed offsets
// read in increasing order, and a final commit at the end; beforeFinal
// records more just before the final commit.
func groupHistory(beforeFinal func(h *History)) *History {
	h := New()
	var final []Record
	for i := 0; i < 6; i++ {
		v := value(0, i)
		h.Produce("prod", v, "k", 0)
		h.Ack(v, 0, int64(i))
		final = append(final, Record{int64(i), v})
	}
	h.Final(0, 0, final)
	for i := 0; i < 4; i++ {
		h.ObserveGroup("g", "g/m1/p0#1", 0, int64(i), value(0, i))
	}
	h.CommitAcked("g", 0, 3)
	h.CommitRead("g", 0, -1) // nothing committed yet when first read
	h.CommitRead("g", 0, 3)
	for i := 3; i < 6; i++ {
		h.ObserveGroup("g", "g/m2/p0#1", 0, int64(i), value(0, i))
	}
	h.CommitAcked("g", 0, 6)
	h.CommitRead("g", 0, 6)
	beforeFinal(h)
	h.FinalCommit("g", 0, 6)
	return h
}

func TestGroupHistoryCleanPasses(t *testing.T) {
	if err := groupHistory(func(*History) {}).Check().Err(); err != nil {
		t.Fatalf("clean group history: %v", err)
	}
}

func TestGroupAnomaliesDetected(t *testing.T) {
	for _, tc := range []struct {
		name        string
		beforeFinal func(h *History)
		after       func(h *History)
		want        Kind
		detail      string
	}{
		{"committed offset read lower than before", func(h *History) {
			h.CommitRead("g", 0, 4)
		}, nil, OffsetRegression, "committed offset read as 4 after it was read as 6"},
		{"final commit below an acknowledged one", func(h *History) {
			h.CommitAcked("g", 0, 7)
		}, nil, OffsetRegression, "below the acknowledged commit of 7"},
		{"final commit lower than a reading", func(h *History) {
			h.CommitRead("g", 0, 7)
		}, nil, OffsetRegression, "final as 6 after it was read as 7"},
		{"committed past a record no member read", func(*History) {}, func(h *History) {
			h.FinalCommit("g", 0, 8) // as if the log had grown to 8, the group reading none of 6 and 7
			h.Final(0, 0, append(h.Snapshot().Final[0].Records, Record{6, "x6"}, Record{7, "x7"}))
			h.Produce("prod", "x6", "", 0)
			h.Produce("prod", "x7", "", 0)
		}, GroupMissed, "group g committed offset 8"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := groupHistory(tc.beforeFinal)
			if tc.after != nil {
				tc.after(h)
			}
			expectOnly(t, h.Check(), tc.want, tc.detail)
		})
	}
}

// expectOnly fails t unless the report holds anomalies of kind want only,
// the first one's text containing detail.
func expectOnly(t *testing.T, r Report, want Kind, detail string) {
	t.Helper()
	for _, k := range Kinds {
		if k != want && r.Counts[k] > 0 {
			t.Fatalf("unexpected %s besides %s:\n%v", k, want, r.Err())
		}
	}
	got := r.Of(want)
	if len(got) == 0 {
		t.Fatalf("want a %s anomaly, got %v", want, r.Err())
	}
	if !strings.Contains(got[0].String(), detail) {
		t.Fatalf("%s anomaly %q lacks %q", want, got[0], detail)
	}
}
