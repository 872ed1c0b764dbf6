package traffic

import (
	"reflect"
	"sync"
	"testing"
)

func TestCountersAddAndSnapshot(t *testing.T) {
	var m Counters
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 100 {
				m.AddIn("b", 3)
				m.AddOut("b", 2, false)
				m.AddOut("a", 1, true)
			}
		}()
	}
	wg.Wait()
	all := func(string) bool { return true }
	want := []TopicBytes{
		{Topic: "a", ReplicationBytesOut: 800},
		{Topic: "b", BytesIn: 2400, BytesOut: 1600},
	}
	if got := m.Snapshot(all); !reflect.DeepEqual(got, want) {
		t.Fatalf("snapshot %+v, want %+v", got, want)
	}
	// A topic gone is dropped; recreated, it starts from zero.
	if got := m.Snapshot(func(topic string) bool { return topic != "a" }); len(got) != 1 || got[0].Topic != "b" {
		t.Fatalf("after a is gone: %+v", got)
	}
	m.AddIn("a", 5)
	if got := m.Snapshot(all); got[0] != (TopicBytes{Topic: "a", BytesIn: 5}) {
		t.Fatalf("recreated a: %+v", got[0])
	}
}
