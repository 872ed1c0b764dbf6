package txn

import (
	"flag"
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/strata-log/strata/broker/group"
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
// -update rewrites the expected outputs. Records stay pending until a
// "durable" command (ok=false: the write failed); marker jobs complete on
// "markers-done".

var update = flag.Bool("update", false, "rewrite golden outputs")

func TestScripts(t *testing.T) {
	testkit.RunScripts(t, "testdata/*.txt", *update, func(*testing.T) testkit.ScriptExec {
		s := newScriptMachine()
		return func(t *testing.T, c testkit.Command) string { return strings.Join(s.exec(t, c.Text), "\n") }
	})
}

type scriptMachine struct {
	m       *Machine
	nextPID int64
	log     []Record // every durable record (reload replays it)
	pending []Record
	jobs    map[string]Markers
}

func newScriptMachine() *scriptMachine {
	s := &scriptMachine{nextPID: 1000, jobs: map[string]Markers{}}
	s.m = s.fresh()
	return s
}

func (s *scriptMachine) fresh() *Machine {
	return NewMachine(MachineConfig{MaxTimeoutMs: 900000, ExpirationMs: 100000})
}

// step runs a machine step, handing it producer ids from nextPID as the
// coordinator does.
func (s *scriptMachine) step(fn func()) {
	StepWithProducerIDs(s.m, func() (int64, error) {
		s.nextPID++
		return s.nextPID, nil
	}, fn)
}

type args map[string]string

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

func (s *scriptMachine) exec(t *testing.T, cmd string) []string {
	fields := strings.Fields(cmd)
	a := args{}
	for _, f := range fields[1:] {
		k, v, _ := strings.Cut(f, "=")
		a[k] = v
	}
	now := a.num(t, "t", 0)
	id := a["id"]
	pid, epoch := a.num(t, "pid", -1), int16(a.num(t, "epoch", -1))
	var lines []string
	s.step(func() { lines = s.run(t, fields[0], a, now, id, pid, epoch) })
	return append(lines, s.drain()...)
}

// run applies one command to the machine; it may run again when the
// machine stops for a producer id (step).
func (s *scriptMachine) run(t *testing.T, cmd string, a args, now int64, id string, pid int64, epoch int16) []string {
	var lines []string
	switch cmd {
	case "init":
		r := s.m.InitProducerID(now, InitInput{ID: id, TimeoutMs: int32(a.num(t, "timeout", 60000)), ProducerID: pid, ProducerEpoch: epoch})
		lines = append(lines, fmt.Sprintf("init %s pid=%d epoch=%d", codeName(r.Code), r.ProducerID, r.ProducerEpoch))
	case "add":
		code, per := s.m.AddPartitions(now, AddInput{ID: id, ProducerID: pid, ProducerEpoch: epoch,
			Partitions: parseTPs(t, a["parts"]), VerifyOnly: a["verify"] == "true"})
		l := "add " + codeName(code)
		for _, c := range per {
			l += " " + codeName(c)
		}
		lines = append(lines, l)
	case "end":
		r := s.m.EndTxn(now, EndInput{ID: id, ProducerID: pid, ProducerEpoch: epoch, Commit: a["commit"] == "true", Bump: a["bump"] == "true"})
		lines = append(lines, fmt.Sprintf("end %s pid=%d epoch=%d", codeName(r.Code), r.ProducerID, r.ProducerEpoch))
	case "durable":
		s.durable(a["ok"] != "false")
	case "markers-done":
		job, ok := s.jobs[id]
		if !ok {
			t.Fatalf("no marker job for %q", id)
		}
		delete(s.jobs, id)
		s.m.MarkersDone(now, job)
	case "tick":
		s.m.Tick(now, func(string) bool { return true })
	case "load": // a record as a loading coordinator finds it
		s.m.ApplyRecord(Meta{ID: id, ProducerID: pid, ProducerEpoch: epoch, LastProducerID: -1, LastProducerEpoch: -1,
			TimeoutMs: 60000, State: StateEmpty, StartMs: -1, LastUpdateMs: now})
	case "describe":
		lines = append(lines, describeLine(s.m, id))
	case "reload":
		lines = append(lines, s.reload(t))
	default:
		t.Fatalf("unknown command %q", cmd)
	}
	return lines
}

// durable reports every pending record's write as done.
func (s *scriptMachine) durable(ok bool) {
	for _, r := range s.pending {
		if ok {
			s.log = append(s.log, r)
		}
		s.m.WriteDone(r.ID, ok)
	}
	s.pending = nil
}

func (s *scriptMachine) drain() []string {
	rd := s.m.Ready()
	var lines []string
	for _, r := range rd.Records {
		lines = append(lines, recordLine(r))
		s.pending = append(s.pending, r)
	}
	for _, j := range rd.Markers {
		s.jobs[j.ID] = j
		lines = append(lines, fmt.Sprintf("markers %s pid=%d epoch=%d commit=%v parts=%s", j.ID, j.ProducerID, j.ProducerEpoch, j.Commit, formatTPs(j.Partitions)))
	}
	return lines
}

// reload replays the durable records into a fresh machine through the
// batch codec, then resumes markers, as a new coordinator does.
func (s *scriptMachine) reload(t *testing.T) string {
	s.m, s.pending, s.jobs = s.fresh(), nil, map[string]Markers{}
	for _, r := range s.log {
		_, err := group.DecodeBatches(group.EncodeBatch([]group.Record{{Key: r.Key, Value: r.Value}}, 0), func(_ int64, k, v []byte) error {
			meta, ok, err := DecodeRecord(k, v)
			if err != nil || !ok {
				t.Fatalf("decode: %v %v", ok, err)
			}
			s.m.ApplyRecord(meta)
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	s.m.ResumeMarkers(func(string) bool { return true })
	return fmt.Sprintf("reloaded %d records", len(s.log))
}

func recordLine(r Record) string {
	meta, _, err := DecodeRecord(r.Key, r.Value)
	if err != nil {
		return "record " + r.ID + " undecodable: " + err.Error()
	}
	if meta.State == StateDead {
		return "record " + r.ID + " tombstone"
	}
	return "record " + metaLine(meta)
}

func metaLine(m Meta) string {
	return fmt.Sprintf("%s state=%s pid=%d epoch=%d timeout=%d parts=%s start=%d update=%d",
		m.ID, StateName(m.State), m.ProducerID, m.ProducerEpoch, m.TimeoutMs, formatTPs(m.Partitions), m.StartMs, m.LastUpdateMs)
}

func describeLine(m *Machine, id string) string {
	meta, ok := m.Describe(id)
	if !ok {
		return "describe " + id + " unknown"
	}
	return fmt.Sprintf("describe %s last=%d/%d", metaLine(meta), meta.LastProducerID, meta.LastProducerEpoch)
}

func parseTPs(t *testing.T, s string) []TopicPartition {
	var out []TopicPartition
	for _, f := range strings.Split(s, ",") {
		if f == "" {
			continue
		}
		i := strings.LastIndex(f, "-")
		p, err := strconv.Atoi(f[i+1:])
		if i < 0 || err != nil {
			t.Fatalf("partition %q", f)
		}
		out = append(out, TopicPartition{Topic: f[:i], Partition: int32(p)})
	}
	return out
}

func formatTPs(tps []TopicPartition) string {
	var parts []string
	for _, tp := range tps {
		parts = append(parts, fmt.Sprintf("%s-%d", tp.Topic, tp.Partition))
	}
	return "[" + strings.Join(parts, ",") + "]"
}

func codeName(code int16) string {
	if code == 0 {
		return "OK"
	}
	return kerr.ErrorForCode(code).(*kerr.Error).Message
}
