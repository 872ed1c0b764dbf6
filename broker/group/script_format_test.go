package group

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
)

// parseProtocols: "range:meta1,roundrobin:meta2".
func parseProtocols(s string) []Protocol {
	var out []Protocol
	for _, f := range splitList(s) {
		name, meta, _ := strings.Cut(f, ":")
		out = append(out, Protocol{Name: name, Metadata: []byte(meta)})
	}
	return out
}

// parseAssignments: "member:assignment,...".
func parseAssignments(s string) []Assignment {
	var out []Assignment
	for _, f := range splitList(s) {
		id, as, _ := strings.Cut(f, ":")
		out = append(out, Assignment{MemberID: id, Assignment: []byte(as)})
	}
	return out
}

// parseRefs: "member" or "member/instance" or "/instance", comma separated.
func parseRefs(s string) []MemberRef {
	var out []MemberRef
	for _, f := range splitList(s) {
		id, inst, _ := strings.Cut(f, "/")
		out = append(out, MemberRef{MemberID: id, InstanceID: inst})
	}
	return out
}

// parseTPs: "topic/0,topic/1".
func parseTPs(t *testing.T, s string) []TopicPartition {
	var out []TopicPartition
	for _, f := range splitList(s) {
		topic, p, _ := strings.Cut(f, "/")
		n, err := strconv.Atoi(p)
		if err != nil {
			t.Fatalf("partition %q: %v", f, err)
		}
		out = append(out, TopicPartition{Topic: topic, Partition: int32(n)})
	}
	return out
}

// parseOffsets: "topic/0:10,topic/1:20".
func parseOffsets(t *testing.T, s string, now int64) map[TopicPartition]Offset {
	out := map[TopicPartition]Offset{}
	for _, f := range splitList(s) {
		tp, off, _ := strings.Cut(f, ":")
		n, err := strconv.ParseInt(off, 10, 64)
		if err != nil {
			t.Fatalf("offset %q: %v", f, err)
		}
		out[parseTPs(t, tp)[0]] = Offset{Offset: n, LeaderEpoch: -1, CommitTimestamp: now}
	}
	return out
}

func parseStates(s string) []State {
	var out []State
	for _, f := range splitList(s) {
		for st := StateEmpty; st <= StateDead; st++ {
			if st.String() == f {
				out = append(out, st)
			}
		}
	}
	return out
}

func splitList(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(s, ",")
}

func responseLine(r Response) string {
	if j := r.Join; j != nil {
		line := fmt.Sprintf("join req=%d %s gen=%d member=%s", r.Req, codeName(j.Code), j.Generation, j.MemberID)
		if j.Code == 0 {
			line += fmt.Sprintf(" proto=%s leader=%s", j.Protocol, j.Leader)
		}
		if j.SkipAssignment {
			line += " skip-assignment"
		}
		if j.Members != nil {
			var ms []string
			for _, m := range j.Members {
				ms = append(ms, m.MemberID+":"+string(m.Metadata))
			}
			line += " members=" + strings.Join(ms, ",")
		}
		return line
	}
	s := r.Sync
	line := fmt.Sprintf("sync req=%d %s", r.Req, codeName(s.Code))
	if s.Code == 0 {
		line += fmt.Sprintf(" assignment=%q", s.Assignment)
	}
	return line
}

func recordLine(t *testing.T, r Record) string {
	if r.Kind == KindOffset {
		if r.Value == nil {
			return fmt.Sprintf("persist offset %s %s/%d tombstone", r.Group, r.Topic, r.Partition)
		}
		o, err := decodeOffsetValue(r.Value)
		if err != nil {
			t.Fatal(err)
		}
		return fmt.Sprintf("persist offset %s %s/%d=%d", r.Group, r.Topic, r.Partition, o.Offset)
	}
	if r.Value == nil {
		return "persist group " + r.Group + " tombstone"
	}
	v, err := decodeGroupValue(r.Value)
	if err != nil {
		t.Fatal(err)
	}
	var ms []string
	for _, m := range v.Members {
		ms = append(ms, fmt.Sprintf("%s:%s", m.MemberID, m.Assignment))
	}
	return fmt.Sprintf("persist group %s gen=%d proto=%s leader=%s members=[%s]",
		r.Group, v.Generation, derefString(v.Protocol), derefString(v.Leader), strings.Join(ms, " "))
}

func describeLines(m *Machine, group string) []string {
	d, ok := m.Describe(group)
	if !ok {
		return []string{"group " + group + " Dead (unknown)"}
	}
	lines := []string{fmt.Sprintf("group %s %s gen=%d proto=%s leader=%s", d.Group, d.State, d.Generation, d.Protocol, d.Leader)}
	for _, mb := range d.Members {
		lines = append(lines, fmt.Sprintf("  member %s instance=%q assignment=%q", mb.MemberID, mb.InstanceID, mb.Assignment))
	}
	return lines
}

func fetchLines(m *Machine, group string) []string {
	offsets := m.FetchOffsets(group, nil)
	var lines []string
	for _, tp := range sortedKeys(offsets) {
		lines = append(lines, fmt.Sprintf("offset %s/%d=%d", tp.Topic, tp.Partition, offsets[tp].Offset))
	}
	if len(lines) == 0 {
		lines = []string{"no offsets"}
	}
	return lines
}
