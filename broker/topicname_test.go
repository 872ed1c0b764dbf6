package broker

import (
	"errors"
	"strings"
	"testing"
)

func TestValidateTopicName(t *testing.T) {
	good := []string{"a", "orders", "Orders.v2", "x_y-z", strings.Repeat("a", 249), "..a"}
	bad := []string{"", ".", "..", strings.Repeat("a", 250), "a b", "a/b", "ä", "a\x00", "topic:1"}
	for _, name := range good {
		if err := validateTopicName(name); err != nil {
			t.Errorf("%q rejected: %v", name, err)
		}
	}
	for _, name := range bad {
		if err := validateTopicName(name); !errors.Is(err, ErrInvalidTopicName) {
			t.Errorf("%q accepted (err %v)", name, err)
		}
	}
}

func TestLooksLikePartitionDir(t *testing.T) {
	for name, want := range map[string]bool{"orders-0": true, "my-topic-12": true, "etcd": false, "objects": false, "x-": false, "-1": false, "a b-1": false} {
		if got := dataLayout("").IsPartitionDir(name); got != want {
			t.Errorf("%q: %v, want %v", name, got, want)
		}
	}
}

func TestEditList(t *testing.T) {
	got := strings.Join(editList(splitList("delete"), splitList("compact, delete"), true), ",")
	if got != "delete,compact" {
		t.Fatalf("append: %q", got)
	}
	got = strings.Join(editList(splitList("delete,compact"), splitList("delete"), false), ",")
	if got != "compact" {
		t.Fatalf("subtract: %q", got)
	}
}
