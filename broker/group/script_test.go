package group

import (
	"flag"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/strata-log/strata/internal/testkit"
)

// Golden scripts drive the Machine through testkit.RunScripts:
// testdata/*.txt hold blocks
//
//	command arg=value ...
//	----
//	expected output lines
//
// separated by blank lines; '#' lines are comments. go test -run Script
// -update rewrites the expected outputs.

var update = flag.Bool("update", false, "rewrite golden outputs")

func TestScripts(t *testing.T) {
	testkit.RunScripts(t, "testdata/*.txt", *update, func(*testing.T) testkit.ScriptExec {
		s := newScriptMachine()
		return func(t *testing.T, c testkit.Command) string { return strings.Join(s.exec(t, c.Text), "\n") }
	})
}

type scriptMachine struct {
	m         *Machine
	ids       int
	logOffset int64
	log       []Record // every record persisted so far (reload replays it)
}

func newScriptMachine() *scriptMachine {
	s := &scriptMachine{}
	s.m = NewMachine(MachineConfig{
		InitialRebalanceDelayMs: 3000, MinSessionTimeoutMs: 6000, MaxSessionTimeoutMs: 300000,
		OffsetsRetentionMs: 100000,
		NewMemberID: func(prefix string) string {
			s.ids++
			return fmt.Sprintf("%s-%d", prefix, s.ids)
		},
	})
	return s
}

type args map[string]string

func (a args) str(k string) string { return a[k] }

func (a args) num(t *testing.T, k string, def int64) int64 {
	v, ok := a[k]
	if !ok {
		return def
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		t.Fatalf("%s=%q: %v", k, v, err)
	}
	return n
}

func parseArgs(fields []string) args {
	a := args{}
	for _, f := range fields {
		k, v, _ := strings.Cut(f, "=")
		a[k] = v
	}
	return a
}

func (s *scriptMachine) exec(t *testing.T, cmd string) []string {
	fields := strings.Fields(cmd)
	a := parseArgs(fields[1:])
	now := a.num(t, "t", 0)
	var lines []string
	switch fields[0] {
	case "join":
		s.m.Join(now, uint64(a.num(t, "req", 0)), JoinInput{
			Group: a.str("group"), MemberID: a.str("member"), InstanceID: a.str("instance"), ClientID: a.str("client"),
			ProtocolType: orDefault(a, "type", "consumer"), Protocols: parseProtocols(a.str("protocols")),
			SessionTimeoutMs: int32(a.num(t, "session", 10000)), RebalanceTimeoutMs: int32(a.num(t, "rebalance", 20000)),
			RequireKnownMemberID: a.str("require-known") == "true",
		})
	case "sync":
		s.m.Sync(now, uint64(a.num(t, "req", 0)), SyncInput{
			Group: a.str("group"), MemberID: a.str("member"), InstanceID: a.str("instance"),
			Generation: int32(a.num(t, "gen", 0)), Assignments: parseAssignments(a.str("assign")),
		})
	case "heartbeat":
		lines = append(lines, "heartbeat "+codeName(s.m.Heartbeat(now, a.str("group"), int32(a.num(t, "gen", 0)),
			MemberRef{MemberID: a.str("member"), InstanceID: a.str("instance")})))
	case "leave":
		codes := s.m.Leave(now, a.str("group"), parseRefs(a.str("members")))
		for i, c := range codes {
			lines = append(lines, fmt.Sprintf("leave %d %s", i, codeName(c)))
		}
	case "commit":
		lines = append(lines, "commit "+codeName(s.m.Commit(now, CommitInput{
			Group: a.str("group"), Generation: int32(a.num(t, "gen", -1)),
			Member: MemberRef{MemberID: a.str("member"), InstanceID: a.str("instance")}, Offsets: parseOffsets(t, a.str("offsets"), now),
		})))
	case "tick":
		s.m.Tick(now)
	case "expire":
		gone := strings.Split(a.str("deleted-topics"), ",")
		s.m.ExpireOffsets(now, func(topic string) bool { return !contains(gone, topic) })
	case "delete":
		lines = append(lines, "delete "+codeName(s.m.DeleteGroup(now, a.str("group"))))
	case "delete-offsets":
		top, codes := s.m.DeleteOffsets(a.str("group"), parseTPs(t, a.str("partitions")))
		lines = append(lines, fmt.Sprintf("delete-offsets %s %s", codeName(top), codeNames(codes)))
	case "describe":
		lines = append(lines, describeLines(s.m, a.str("group"))...)
	case "list":
		for _, l := range s.m.List(parseStates(a.str("states"))) {
			lines = append(lines, fmt.Sprintf("group %s type=%q state=%s", l.Group, l.ProtocolType, l.State))
		}
	case "fetch":
		lines = append(lines, fetchLines(s.m, a.str("group"))...)
	case "reload":
		lines = append(lines, s.reload(t, now)...)
	default:
		t.Fatalf("unknown command %q", fields[0])
	}
	return append(lines, s.drain(t, now)...)
}

// drain prints the Ready output; offset records are applied at once (as
// the coordinator does once they are durable) and kept for reload.
func (s *scriptMachine) drain(t *testing.T, now int64) []string {
	rd := s.m.Ready()
	var lines []string
	for _, r := range rd.Records {
		lines = append(lines, recordLine(t, r))
		if r.Kind == KindOffset {
			if err := s.m.ApplyRecord(now, s.logOffset, r); err != nil {
				t.Fatal(err)
			}
		}
		s.log = append(s.log, r)
		s.logOffset++
	}
	for _, r := range rd.Responses {
		lines = append(lines, responseLine(r))
	}
	return lines
}

// reload replays every persisted record into a fresh machine, as a new
// coordinator loading __consumer_offsets does.
func (s *scriptMachine) reload(t *testing.T, now int64) []string {
	fresh := newScriptMachine()
	fresh.ids = s.ids
	for i, r := range s.log {
		// Round-trip through the batch codec, as the log would.
		_, err := DecodeBatches(EncodeBatch([]Record{r}, now), func(_ int64, key, value []byte) error {
			d, ok, err := DecodeRecord(key, value)
			if err != nil || !ok {
				t.Fatalf("decode: %v %v", ok, err)
			}
			return fresh.m.ApplyRecord(now, int64(i), d)
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	s.m, s.ids = fresh.m, fresh.ids
	return []string{fmt.Sprintf("reloaded %d records", len(s.log))}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func orDefault(a args, k, def string) string {
	if v, ok := a[k]; ok {
		return v
	}
	return def
}

func codeName(code int16) string {
	if code == 0 {
		return "NONE"
	}
	if e, ok := kerr.ErrorForCode(code).(*kerr.Error); ok {
		return e.Message
	}
	return strconv.Itoa(int(code))
}

func codeNames(codes []int16) string {
	names := make([]string, len(codes))
	for i, c := range codes {
		names[i] = codeName(c)
	}
	return "[" + strings.Join(names, " ") + "]"
}

func sortedKeys[V any](m map[TopicPartition]V) []TopicPartition {
	keys := make([]TopicPartition, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return compareTP(keys[i], keys[j]) < 0 })
	return keys
}
