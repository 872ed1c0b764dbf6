package txn

import (
	"fmt"
	"math/rand"
	"reflect"
	"testing"
)

// TestRandomOperations drives the machine with random requests, write
// outcomes, marker completions and ticks, checking after every step that
// epochs never go back for a producer id, and at quiet points that the
// durable records alone rebuild the same state (what a new coordinator
// loads).
func TestRandomOperations(t *testing.T) {
	for seed := int64(1); seed <= 30; seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) { randomRun(t, rand.New(rand.NewSource(seed))) })
	}
}

func randomRun(t *testing.T, rng *rand.Rand) {
	s := newScriptMachine()
	ids := []string{"a", "b", "c"}
	tps := []TopicPartition{{"x", 0}, {"x", 1}, {"y", 0}}
	seen := map[int64]int16{} // producer id -> highest durable epoch
	checked := 0              // records of s.log checked so far
	now := int64(0)
	for step := 0; step < 400; step++ {
		now += int64(rng.Intn(300))
		id := ids[rng.Intn(len(ids))]
		meta, known := s.m.Describe(id)
		pid, epoch := meta.ProducerID, meta.ProducerEpoch
		if !known || rng.Intn(8) == 0 {
			pid, epoch = int64(rng.Intn(3)+1000), int16(rng.Intn(3))
		}
		switch rng.Intn(8) {
		case 0:
			timeout := int32(rng.Intn(2000) + 1)
			s.step(func() {
				s.m.InitProducerID(now, InitInput{ID: id, TimeoutMs: timeout, ProducerID: -1, ProducerEpoch: -1})
			})
		case 1, 2:
			s.m.AddPartitions(now, AddInput{ID: id, ProducerID: pid, ProducerEpoch: epoch,
				Partitions: []TopicPartition{tps[rng.Intn(len(tps))]}, VerifyOnly: rng.Intn(4) == 0})
		case 3:
			in := EndInput{ID: id, ProducerID: pid, ProducerEpoch: epoch, Commit: rng.Intn(2) == 0, Bump: rng.Intn(2) == 0}
			s.step(func() { s.m.EndTxn(now, in) })
		case 4:
			s.drain()
			s.durable(rng.Intn(5) != 0)
		case 5:
			s.drain()
			for jid, job := range s.jobs {
				delete(s.jobs, jid)
				s.m.MarkersDone(now, job)
			}
		case 6:
			s.step(func() { s.m.Tick(now, func(string) bool { return true }) })
		case 7:
			s.drain()
			s.durable(true)
			s.drain()
			s.durable(true)
			checkReload(t, s)
		}
		s.drain()
		// Durable records never take a producer's epoch back.
		for ; checked < len(s.log); checked++ {
			m, _, err := DecodeRecord(s.log[checked].Key, s.log[checked].Value)
			if err != nil {
				t.Fatal(err)
			}
			if old, ok := seen[m.ProducerID]; ok && m.State != StateDead && m.ProducerEpoch < old {
				t.Fatalf("step %d: producer %d epoch went back %d -> %d", step, m.ProducerID, old, m.ProducerEpoch)
			}
			seen[m.ProducerID] = max(seen[m.ProducerID], m.ProducerEpoch)
		}
	}
}

// checkReload compares the machine with one rebuilt from durable records.
func checkReload(t *testing.T, s *scriptMachine) {
	t.Helper()
	before := s.m.List(func(Meta) bool { return true })
	jobs := s.jobs
	s.reload(t)
	s.drain()
	s.jobs = jobs
	after := s.m.List(func(Meta) bool { return true })
	if !reflect.DeepEqual(before, after) {
		t.Fatalf("reload differs:\nbefore %+v\nafter  %+v", before, after)
	}
}
