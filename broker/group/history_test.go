package group

import (
	"errors"
	"testing"
)

func TestOffsetHistoryAsOf(t *testing.T) {
	a0, a1, b0 := TopicPartition{"a", 0}, TopicPartition{"a", 1}, TopicPartition{"b", 0}
	commit := func(g string, tp TopicPartition, off int64) Record {
		return offsetRecord(g, tp, &Offset{Offset: off, LeaderEpoch: 3, CommitTimestamp: 1})
	}
	type stamped struct {
		r  Record
		ts int64
	}
	log := []stamped{
		{commit("g1", a0, 10), 100},
		{commit("g1", a1, 5), 110},
		{commit("g2", b0, 7), 120},
		{commit("g1", a0, 20), 200},
		{offsetRecord("g1", a1, nil), 210}, // offset deleted
		{commit("g2", b0, 9), 220},
		{groupRecord(&groupState{id: "g2", state: StateDead}), 230}, // group deleted
		{commit("g1", a0, 30), 300},
	}
	cases := []struct {
		asOf int64
		want map[string]map[TopicPartition]int64
	}{
		{99, map[string]map[TopicPartition]int64{}},
		{150, map[string]map[TopicPartition]int64{"g1": {a0: 10, a1: 5}, "g2": {b0: 7}}},
		{220, map[string]map[TopicPartition]int64{"g1": {a0: 20}, "g2": {b0: 9}}},
		{299, map[string]map[TopicPartition]int64{"g1": {a0: 20}}},
		{-1, map[string]map[TopicPartition]int64{"g1": {a0: 30}}},
	}
	for _, c := range cases {
		h := NewOffsetHistory(c.asOf)
		for _, s := range log {
			if err := h.Add(s.r.Key, s.r.Value, s.ts); err != nil {
				t.Fatal(err)
			}
		}
		got := h.Offsets()
		if len(got) != len(c.want) {
			t.Fatalf("as of %d: groups %v, want %v", c.asOf, got, c.want)
		}
		for g, offs := range c.want {
			if len(got[g]) != len(offs) {
				t.Fatalf("as of %d: group %s %v, want %v", c.asOf, g, got[g], offs)
			}
			for tp, off := range offs {
				if o := got[g][tp]; o.Offset != off || o.LeaderEpoch != 3 {
					t.Fatalf("as of %d: %s %v = %+v, want %d", c.asOf, g, tp, o, off)
				}
			}
		}
	}
	if err := NewOffsetHistory(-1).Add([]byte{0, 1, 0xff}, []byte{1}, 0); !errors.Is(err, ErrCorruptRecord) {
		t.Fatalf("corrupt key: %v", err)
	}
}
