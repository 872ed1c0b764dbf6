package replication

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
)

// scriptEnv is one script's world: the replica under test and its local
// log's epoch view (which the script's "ready" truncates, as a shell would).
type scriptEnv struct {
	r   *Replica
	log *MemEpochs
}

func TestScripts(t *testing.T) { runScripts(t, execScript) }

func execScript(t *testing.T, env *scriptEnv, c scriptCmd) string {
	t.Helper()
	if c.name != "new" && env.r == nil {
		t.Fatalf("line %d: %s before new", c.line, c.name)
	}
	switch c.name {
	case "new":
		return cmdNew(t, env, c)
	case "log":
		return cmdLog(t, env, c)
	case "become-leader":
		return errString(env.r.BecomeLeader(LeaderState{
			Epoch: c.int32Arg(t, "epoch", 0), Version: c.int64Arg(t, "version", 1),
			Replicas: c.idsArg(t, "replicas"), ISR: c.idsArg(t, "isr"),
			LEO: c.int64Arg(t, "leo", 0), DurableOffset: c.int64Arg(t, "durable", c.int64Arg(t, "leo", 0)),
			HighWatermark: c.int64Arg(t, "hw", 0),
		}))
	case "become-follower":
		return errString(env.r.BecomeFollower(FollowerState{
			Epoch: c.int32Arg(t, "epoch", 0), Leader: c.int32Arg(t, "leader", -1),
			LEO: c.int64Arg(t, "leo", env.log.LEO), HighWatermark: c.int64Arg(t, "hw", 0),
		}))
	case "append":
		return errString(env.r.Append(c.int64Arg(t, "leo", 0)))
	case "flush":
		return errString(env.r.Flushed(c.int64Arg(t, "offset", 0)))
	case "fetch":
		return errString(env.r.FollowerFetch(c.int32Arg(t, "replica", 0), c.int64Arg(t, "offset", 0),
			c.int32Arg(t, "epoch", env.r.LeaderEpoch())))
	case "tick":
		return errString(env.r.Tick(c.int64Arg(t, "ms", 0)))
	case "isr-committed":
		return errString(env.r.ISRCommitted(c.int64Arg(t, "version", 0)))
	case "isr-rejected":
		return errString(env.r.ISRRejected())
	case "wait":
		return errString(env.r.WaitForAcks(AckWaiter{ID: uint64(c.int64Arg(t, "id", 0)),
			RequiredOffset: c.int64Arg(t, "offset", 0), TimeoutMs: c.int64Arg(t, "timeout", 30000)}))
	case "check-acks-all":
		return errString(env.r.CheckAcksAll())
	case "min-isr":
		return errString(env.r.SetMinInsyncReplicas(int(c.int64Arg(t, "n", 1))))
	case "epoch-answer":
		return errString(env.r.HandleEpochEndOffset(EpochEndOffset{RequestedEpoch: c.int32Arg(t, "requested", 0),
			LeaderEpoch: c.int32Arg(t, "epoch", -1), EndOffset: c.int64Arg(t, "end", -1)}))
	case "leader-epoch-end":
		epoch, end, err := env.r.LeaderEpochEndOffset(c.int32Arg(t, "epoch", 0))
		if err != nil {
			return errString(err)
		}
		return fmt.Sprintf("epoch=%d end=%d", epoch, end)
	case "fetched":
		return cmdFetched(t, env, c)
	case "ready":
		return cmdReady(env)
	case "status":
		return formatStatus(env.r.Status())
	}
	t.Fatalf("line %d: unknown command %q", c.line, c.name)
	return ""
}

func cmdNew(t *testing.T, env *scriptEnv, c scriptCmd) string {
	env.log = &MemEpochs{}
	r, err := New(Config{
		ReplicaID: c.int32Arg(t, "id", 1), ReplicaLagTimeMaxMs: c.int64Arg(t, "lag", 0),
		MinInsyncReplicas: int(c.int64Arg(t, "min-isr", 0)), FsyncDurability: c.args["fsync"] == "true",
		MaxAckWaiters: int(c.int64Arg(t, "max-waiters", 0)),
	}, env.log)
	if err != nil {
		return errString(err)
	}
	env.r = r
	return ""
}

// cmdLog sets the local log: epochs=E@start,... leo=N.
func cmdLog(t *testing.T, env *scriptEnv, c scriptCmd) string {
	env.log.Entries = nil
	if v := c.args["epochs"]; v != "" {
		for _, part := range strings.Split(v, ",") {
			e, s, ok := strings.Cut(part, "@")
			epoch, err1 := strconv.ParseInt(e, 10, 32)
			start, err2 := strconv.ParseInt(s, 10, 64)
			if !ok || err1 != nil || err2 != nil {
				t.Fatalf("line %d: bad epoch entry %q", c.line, part)
			}
			env.log.Entries = append(env.log.Entries, EpochStart{Epoch: int32(epoch), StartOffset: start})
		}
	}
	env.log.LEO = c.int64Arg(t, "leo", 0)
	return formatLog(env.log)
}

// cmdFetched plays a fetch response as the fetcher shell would: validate,
// append records of record-epoch to the local log, report.
func cmdFetched(t *testing.T, env *scriptEnv, c scriptCmd) string {
	epoch := c.int32Arg(t, "epoch", env.r.LeaderEpoch())
	offset := c.int64Arg(t, "offset", env.log.LEO)
	if err := env.r.ValidateFetch(epoch, offset); err != nil {
		return errString(err)
	}
	leo := c.int64Arg(t, "leo", offset)
	env.log.Append(c.int32Arg(t, "record-epoch", epoch), leo-offset)
	return errString(env.r.Fetched(epoch, leo, c.int64Arg(t, "hw", 0)))
}

// cmdReady prints the Ready, applies truncation to the local log, advances.
func cmdReady(env *scriptEnv) string {
	if !env.r.HasReady() {
		return "(none)"
	}
	rd := env.r.Ready()
	var b strings.Builder
	if rd.HighWatermarkChanged {
		fmt.Fprintf(&b, "hw=%d\n", rd.HighWatermark)
	}
	if p := rd.Proposal; p != nil {
		fmt.Fprintf(&b, "propose %s epoch=%d version=%d isr=%s changed=%s\n", p.Change, p.LeaderEpoch, p.ExpectedVersion, ids(p.ISR), ids(p.Changed))
	}
	for _, a := range rd.Acks {
		res := "ok"
		if a.Err != nil {
			res = a.Err.Error()
		}
		fmt.Fprintf(&b, "ack id=%d offset=%d: %s\n", a.ID, a.RequiredOffset, res)
	}
	if rd.Fenced {
		b.WriteString("fenced\n")
	}
	if rd.Truncate != nil {
		env.log.Truncate(rd.Truncate.Offset)
		fmt.Fprintf(&b, "truncate offset=%d -> %s\n", rd.Truncate.Offset, formatLog(env.log))
	}
	if q := rd.EpochQuery; q != nil {
		fmt.Fprintf(&b, "epoch-query leader=%d current=%d epoch=%d\n", q.Leader, q.CurrentEpoch, q.Epoch)
	}
	if f := rd.Fetch; f != nil {
		fmt.Fprintf(&b, "fetch leader=%d epoch=%d offset=%d\n", f.Leader, f.Epoch, f.Offset)
	}
	env.r.Advance(rd)
	return b.String()
}

func formatLog(m *MemEpochs) string {
	parts := make([]string, 0, len(m.Entries))
	for _, e := range m.Entries {
		parts = append(parts, fmt.Sprintf("%d@%d", e.Epoch, e.StartOffset))
	}
	return fmt.Sprintf("log epochs=%s leo=%d", strings.Join(parts, ","), m.LEO)
}

func formatStatus(s Status) string {
	var b strings.Builder
	fmt.Fprintf(&b, "role=%s epoch=%d hw=%d now=%d\n", s.Role, s.LeaderEpoch, s.HighWatermark, s.NowMs)
	switch s.Role {
	case RoleLeader:
		prop := "none"
		if s.Proposal != nil {
			prop = fmt.Sprintf("%s:%s", s.Proposal.Change, ids(s.Proposal.ISR))
		}
		fmt.Fprintf(&b, "leo=%d durable=%d epoch-start=%d version=%d\n", s.LEO, s.DurableOffset, s.EpochStartOffset, s.Version)
		fmt.Fprintf(&b, "replicas=%s isr=%s proposal=%s pending-acks=%d under-replicated=%t under-min-isr=%t\n",
			ids(s.Replicas), ids(s.ISR), prop, s.PendingAcks, s.UnderReplicated, s.UnderMinISR)
		for _, f := range s.Followers {
			fmt.Fprintf(&b, "follower %d: isr=%t leo=%d lag=%d caught-up=%d fetched=%d\n",
				f.ReplicaID, f.InISR, f.LEO, f.Lag, f.LastCaughtUpMs, f.LastFetchMs)
		}
	case RoleFollower:
		fmt.Fprintf(&b, "leader=%d leo=%d truncating=%t\n", s.Leader, s.FollowerLEO, s.Truncating)
	}
	c := s.Counters
	fmt.Fprintf(&b, "counters: shrinks=%d expands=%d fenced=%d truncations=%d", c.ISRShrinks, c.ISRExpands, c.Fenced, c.Truncations)
	return b.String()
}

func ids(v []int32) string {
	parts := make([]string, len(v))
	for i, id := range v {
		parts[i] = strconv.Itoa(int(id))
	}
	return "[" + strings.Join(parts, ",") + "]"
}
