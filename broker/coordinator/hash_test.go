package coordinator

import "testing"

func TestPartitionForMatchesKafka(t *testing.T) {
	// Java: "my-group".hashCode() == -1906497762 (abs mod 50 = 12);
	// "".hashCode() == 0; "polygenelubricants".hashCode() == Integer.MIN_VALUE,
	// which Utils.abs maps to 0.
	for _, tc := range []struct {
		group string
		want  int32
	}{{"my-group", 12}, {"", 0}, {"polygenelubricants", 0}, {"console-consumer-1", 24}} {
		if got := PartitionFor(tc.group, 50); got != tc.want {
			t.Errorf("PartitionFor(%q) = %d, want %d", tc.group, got, tc.want)
		}
	}
	if javaStringHashCode("my-group") != -1906497762 {
		t.Errorf("hash of my-group = %d", javaStringHashCode("my-group"))
	}
	if javaStringHashCode("polygenelubricants") != -1<<31 {
		t.Errorf("hash of polygenelubricants = %d", javaStringHashCode("polygenelubricants"))
	}
}
