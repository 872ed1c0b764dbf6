package replication

import (
	"encoding/binary"
	"slices"
	"testing"
)

// FuzzReplica drives one replica with arbitrary inputs, including ones a
// correct shell never sends, and checks that it never panics and that its
// invariants hold after every input:
//   - a leader's HW <= its durable LEO <= its LEO, and never decreases
//     within an epoch while it leads;
//   - a leader's ISR holds itself and is a subset of the replicas, and so
//     is the ISR of a proposal in flight;
//   - a follower's HW <= its LEO;
//   - Ready/Advance leaves nothing behind.
func FuzzReplica(f *testing.F) {
	f.Add([]byte{0, 3, 7, 1, 10, 2, 2, 10, 3, 50, 8, 9})
	f.Add([]byte{0, 1, 3, 1, 5, 4, 200, 9, 12, 6, 9})
	f.Add([]byte{5, 2, 2, 9, 10, 1, 11, 3, 12, 1, 9, 13, 7, 9})
	f.Add([]byte{0, 1, 15, 1, 20, 14, 1, 3, 100, 3, 100, 9, 7, 9, 0, 2, 15, 9})
	f.Fuzz(func(t *testing.T, data []byte) {
		epochs := &MemEpochs{}
		r, err := New(Config{ReplicaID: 1, ReplicaLagTimeMaxMs: 100, MinInsyncReplicas: 2, FsyncDurability: len(data)%2 == 0, MaxAckWaiters: 8}, epochs)
		if err != nil {
			t.Fatal(err)
		}
		in := fuzzInput{data: data}
		var lastEpoch int32 = -1
		var lastHW int64 = -1
		for !in.done() {
			fuzzStep(r, epochs, &in)
			checkFuzzInvariants(t, r, &lastEpoch, &lastHW)
		}
	})
}

type fuzzInput struct {
	data []byte
	pos  int
}

func (in *fuzzInput) done() bool { return in.pos >= len(in.data) }

func (in *fuzzInput) byte() byte {
	if in.done() {
		return 0
	}
	b := in.data[in.pos]
	in.pos++
	return b
}

// small returns a value in [-2, 253], mostly small offsets and epochs.
func (in *fuzzInput) small() int64 { return int64(in.byte()) - 2 }

// wide returns a value that may be huge or negative.
func (in *fuzzInput) wide() int64 {
	var b [8]byte
	for i := range b {
		b[i] = in.byte()
	}
	return int64(binary.LittleEndian.Uint64(b[:]))
}

// ids decodes a replica set from a bit mask over ids 1..4 (and 9, unknown).
func (in *fuzzInput) ids() []int32 {
	mask := in.byte()
	var out []int32
	for i, id := range []int32{1, 2, 3, 4, 9} {
		if mask&(1<<i) != 0 {
			out = append(out, id)
		}
	}
	return out
}

func fuzzStep(r *Replica, epochs *MemEpochs, in *fuzzInput) {
	switch in.byte() % 16 {
	case 0:
		_ = r.BecomeLeader(LeaderState{Epoch: int32(in.small()), Version: in.small(), Replicas: in.ids(), ISR: in.ids(),
			LEO: in.small(), DurableOffset: in.small(), HighWatermark: in.small()})
	case 1:
		_ = r.Append(in.small())
	case 2:
		_ = r.FollowerFetch(int32(in.small()), in.small(), int32(in.small()))
	case 3:
		_ = r.Tick(in.small() * 10)
	case 4:
		_ = r.ISRCommitted(in.small())
	case 5:
		_ = r.ISRRejected()
	case 6:
		_ = r.WaitForAcks(AckWaiter{ID: uint64(in.byte()), RequiredOffset: in.small(), TimeoutMs: in.small()})
	case 7:
		_ = r.Flushed(in.small())
	case 8:
		_ = r.BecomeFollower(FollowerState{Epoch: int32(in.small()), Leader: int32(in.small()), LEO: epochs.LEO, HighWatermark: in.small()})
	case 9:
		rd := r.Ready()
		if rd.Truncate != nil {
			epochs.Truncate(rd.Truncate.Offset)
		}
		r.Advance(rd)
	case 10:
		_ = r.HandleEpochEndOffset(EpochEndOffset{RequestedEpoch: int32(in.small()), LeaderEpoch: int32(in.small()), EndOffset: in.small()})
	case 11:
		epoch, offset := int32(in.small()), in.small()
		if r.ValidateFetch(epoch, offset) == nil {
			n := in.small()
			epochs.Append(epoch, n)
			_ = r.Fetched(epoch, epochs.LEO, in.small())
		}
	case 12:
		_ = r.SetMinInsyncReplicas(int(in.small()))
	case 13:
		_ = r.Tick(in.wide())
		_ = r.Append(in.wide())
	case 14:
		_ = r.FollowerFetch(int32(in.small()), in.wide(), int32(in.wide()))
		_, _, _ = r.LeaderEpochEndOffset(int32(in.small()))
	case 15:
		epochs.Append(int32(in.small()), in.small())
		_ = r.CheckAcksAll()
		_ = r.Status()
	}
}

func checkFuzzInvariants(t *testing.T, r *Replica, lastEpoch *int32, lastHW *int64) {
	s := r.Status()
	switch s.Role {
	case RoleLeader:
		if s.HighWatermark > s.DurableOffset || s.DurableOffset > s.LEO {
			t.Fatalf("leader: HW %d, durable %d, LEO %d", s.HighWatermark, s.DurableOffset, s.LEO)
		}
		if s.LeaderEpoch == *lastEpoch && s.HighWatermark < *lastHW && *lastEpoch >= 0 {
			t.Fatalf("leader epoch %d: HW went back from %d to %d", s.LeaderEpoch, *lastHW, s.HighWatermark)
		}
		*lastEpoch, *lastHW = s.LeaderEpoch, s.HighWatermark
		checkISR(t, s.ISR, s.Replicas)
		if s.Proposal != nil {
			checkISR(t, s.Proposal.ISR, s.Replicas)
		}
	case RoleFollower:
		if s.HighWatermark > s.FollowerLEO {
			t.Fatalf("follower: HW %d > LEO %d", s.HighWatermark, s.FollowerLEO)
		}
	}
	if s.Role != RoleLeader {
		*lastEpoch = -1 // monotonicity holds over one continuous leadership
	}
	if r.HasReady() {
		r2 := r.Ready()
		_ = r2 // Ready must not change state
		if !r.HasReady() {
			t.Fatal("Ready consumed the outputs")
		}
	}
}

func checkISR(t *testing.T, isr, replicas []int32) {
	t.Helper()
	if !slices.Contains(isr, 1) {
		t.Fatalf("ISR %v lacks the leader", isr)
	}
	for _, id := range isr {
		if !slices.Contains(replicas, id) {
			t.Fatalf("ISR %v not within replicas %v", isr, replicas)
		}
	}
}
