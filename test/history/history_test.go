package history

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

// clean records n acknowledged records per partition (0 and 1), one
// consumer session reading them all, and a final read that matches.
func clean(n int) *History {
	h := New()
	for p := int32(0); p < 2; p++ {
		var final []Record
		for i := 0; i < n; i++ {
			v := value(p, i)
			h.Produce("prod", v, "k", p)
			h.Ack(v, p, int64(i))
			h.Observe("s1", p, int64(i), v)
			final = append(final, Record{int64(i), v})
		}
		h.Final(p, 0, final)
	}
	return h
}

func value(p int32, i int) string { return fmt.Sprintf("p%d-v%d", p, i) }

func TestCleanHistoryPasses(t *testing.T) {
	h := clean(10)
	// Failed and unknown attempts that never appear are fine too.
	h.Produce("prod", "gone", "", 0)
	h.Fail("gone")
	h.Produce("prod", "maybe", "", 1)
	h.Unknown("maybe")
	r := h.Check()
	if err := r.Err(); err != nil {
		t.Fatalf("clean history: %v", err)
	}
	want := Stats{Attempts: 22, Acked: 20, Failed: 1, Unknown: 1, Observations: 20, FinalRecords: 20}
	if r.Stats != want {
		t.Fatalf("stats %+v, want %+v", r.Stats, want)
	}
}

// An unknown-outcome write that did land, and a log start above old acked
// records (retention), are not anomalies.
func TestUnknownLandedAndRetentionPass(t *testing.T) {
	h := New()
	for i := 0; i < 5; i++ {
		h.Produce("prod", value(0, i), "", 0)
		if i == 4 {
			h.Unknown(value(0, i))
			continue
		}
		h.Ack(value(0, i), 0, int64(i))
	}
	h.Final(0, 2, []Record{{2, value(0, 2)}, {3, value(0, 3)}, {4, value(0, 4)}})
	if err := h.Check().Err(); err != nil {
		t.Fatal(err)
	}
}

func TestAnomaliesDetected(t *testing.T) {
	for _, tc := range []struct {
		name   string
		mutate func(h *History)
		want   Kind
		detail string
	}{
		{"acked write missing from final read", func(h *History) {
			h.Final(0, 0, recordsOf(0, 0, 1, 2, 4, 5, 6, 7, 8, 9)) // offset 3 lost
		}, LostWrite, "acknowledged to prod"},
		{"observed record gone (log truncated)", func(h *History) {
			h.Produce("prod", "late", "", 0)
			h.Unknown("late")
			h.Observe("s2", 0, 10, "late")
		}, LostWrite, "then gone"},
		{"value at two offsets", func(h *History) {
			final := recordsOf(1, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9)
			final = append(final, Record{10, value(1, 4)})
			h.Final(1, 0, final)
		}, Duplicate, "p1@4, p1@10"},
		{"one offset, two values", func(h *History) {
			h.Produce("prod", "other", "", 0)
			h.Unknown("other")
			h.Observe("s2", 0, 5, "other")
		}, InconsistentOffsets, `"other" (session s2) vs "p0-v5"`},
		{"ack at an offset the final read disagrees with", func(h *History) {
			h.Produce("prod", "x", "", 1)
			h.Ack("x", 1, 3)
			h.Final(1, 0, append(recordsOf(1, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9), Record{10, "x"}))
		}, InconsistentOffsets, "final read holds it at p1@10"},
		{"consumer offsets go backwards", func(h *History) {
			h.Observe("s1", 0, 7, value(0, 7))
		}, NonmonotonicPoll, "polled offset 7 after 9"},
		{"consumer jumps over an existing record", func(h *History) {
			h.Observe("s3", 1, 2, value(1, 2))
			h.Observe("s3", 1, 6, value(1, 6))
		}, PollSkip, "jumped from offset 2 to 6"},
		{"idempotent producer order broken", func(h *History) {
			h.Produce("prod2", "a", "", 0)
			h.Produce("prod2", "b", "", 0)
			h.Ack("a", 0, 11)
			h.Ack("b", 0, 10)
			h.Final(0, 0, append(recordsOf(0, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9), Record{10, "b"}, Record{11, "a"}))
		}, Reorder, `after "a"`},
		{"failed write visible", func(h *History) {
			h.Produce("prod", "f", "", 1)
			h.Fail("f")
			h.Final(1, 0, append(recordsOf(1, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9), Record{10, "f"}))
		}, PhantomWrite, "recorded as failed"},
		{"record never produced", func(h *History) {
			h.Final(1, 0, append(recordsOf(1, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9), Record{10, "ghost"}))
		}, PhantomWrite, "never produced"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := clean(10)
			tc.mutate(h)
			r := h.Check()
			err := r.Err()
			if !errors.Is(err, ErrAnomalies) {
				t.Fatalf("want %s, got no error", tc.want)
			}
			got := r.Of(tc.want)
			if len(got) == 0 || r.Counts[tc.want] != len(got) {
				t.Fatalf("want a %s anomaly, got %v", tc.want, err)
			}
			if !strings.Contains(got[0].Detail, tc.detail) && !strings.Contains(got[0].String(), tc.detail) {
				t.Fatalf("%s detail %q lacks %q", tc.want, got[0], tc.detail)
			}
			if !strings.Contains(err.Error(), string(tc.want)+": ") {
				t.Fatalf("Err() does not name %s:\n%v", tc.want, err)
			}
		})
	}
}

// Only the anomaly put in is reported: a lost write is not also called a
// poll skip or a duplicate.
func TestLostWriteReportedAlone(t *testing.T) {
	h := clean(10)
	h.Final(0, 0, recordsOf(0, 0, 1, 2, 4, 5, 6, 7, 8, 9))
	r := h.Check()
	for _, k := range Kinds {
		want := 0
		if k == LostWrite {
			want = 1
		}
		if r.Counts[k] != want {
			t.Fatalf("%s: %d anomalies, want %d:\n%v", k, r.Counts[k], want, r.Err())
		}
	}
	if a := r.Of(LostWrite)[0]; a.Partition != 0 || a.Offset != 3 || a.Value != value(0, 3) {
		t.Fatalf("lost write reported as %v", a)
	}
}

// A partition without a final read cannot vouch for its acked records.
func TestMissingFinalReadIsLoss(t *testing.T) {
	h := New()
	h.Produce("prod", "v", "", 3)
	h.Ack("v", 3, 0)
	if got := h.Check().Counts[LostWrite]; got != 1 {
		t.Fatalf("lost writes %d, want 1", got)
	}
}

// Examples are capped; counts are not.
func TestExamplesCapped(t *testing.T) {
	h := New()
	for i := 0; i < maxExamples+50; i++ {
		v := fmt.Sprint(i)
		h.Produce("prod", v, "", 0)
		h.Ack(v, 0, int64(i))
	}
	r := h.Check()
	if r.Counts[LostWrite] != maxExamples+50 || len(r.Of(LostWrite)) != maxExamples {
		t.Fatalf("count %d, kept %d", r.Counts[LostWrite], len(r.Of(LostWrite)))
	}
}

func recordsOf(p int32, idx ...int) []Record {
	var out []Record
	for _, i := range idx {
		out = append(out, Record{int64(i), value(p, i)})
	}
	return out
}
