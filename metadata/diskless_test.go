package metadata_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/strata-log/strata/metadata"
)

func TestDisklessConfig(t *testing.T) {
	cases := []struct {
		name      string
		overrides map[string]string
		diskless  bool
		err       string // "" valid; else a substring of the error
	}{
		{name: "default classic", overrides: nil},
		{name: "explicit false", overrides: map[string]string{"diskless.enable": "false"}},
		{name: "diskless", overrides: map[string]string{"diskless.enable": "true"}, diskless: true},
		{name: "case and blanks", overrides: map[string]string{"diskless.enable": " TRUE "}, diskless: true},
		{name: "not a boolean", overrides: map[string]string{"diskless.enable": "yes"}, err: "diskless.enable"},
		{name: "without remote storage",
			overrides: map[string]string{"diskless.enable": "true", "remote.storage.enable": "false"},
			err:       "needs remote.storage.enable=true"},
		{name: "compacted", overrides: map[string]string{"diskless.enable": "true", "cleanup.policy": "compact"},
			diskless: true},
		{name: "compact and delete", overrides: map[string]string{"diskless.enable": "true", "cleanup.policy": "delete,compact"},
			diskless: true},
		{name: "classic may turn remote storage off",
			overrides: map[string]string{"diskless.enable": "false", "remote.storage.enable": "false"}},
		{name: "local configs are accepted and unused",
			overrides: map[string]string{"diskless.enable": "true", "local.retention.ms": "1000", "min.insync.replicas": "2"},
			diskless:  true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := metadata.ValidateTopicConfigs(c.overrides)
			if c.err != "" {
				if !errors.Is(err, metadata.ErrInvalidConfig) || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("err %v, want ErrInvalidConfig with %q", err, c.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			cfg, err := metadata.ParseTopicConfig(c.overrides)
			if err != nil || cfg.DisklessEnable != c.diskless || metadata.DisklessConfigs(c.overrides) != c.diskless {
				t.Fatalf("parsed %v (err %v), DisklessConfigs %v, want %v", cfg.DisklessEnable, err,
					metadata.DisklessConfigs(c.overrides), c.diskless)
			}
		})
	}
	def, ok := metadata.LookupTopicConfig("diskless.enable")
	if !ok || def.Type != metadata.ConfigBoolean || def.Default != "false" || def.ServerDefault != "" || def.Internal || def.Doc == "" {
		t.Fatalf("diskless.enable def %+v", def)
	}
}

// TestDisklessConfigChange: whether a topic is diskless is fixed at
// creation; every other change goes through the usual validation.
func TestDisklessConfigChange(t *testing.T) {
	diskless := map[string]string{"diskless.enable": "true"}
	cases := []struct {
		name          string
		before, after map[string]string
		fixed         bool // refused as a change of diskless.enable
		invalid       bool // refused by another rule
	}{
		{name: "classic edits", before: nil, after: map[string]string{"retention.ms": "1000"}},
		{name: "diskless edits", before: diskless, after: map[string]string{"diskless.enable": "true", "retention.ms": "1000"}},
		{name: "set to the same value", before: diskless, after: map[string]string{"diskless.enable": "True"}},
		{name: "classic states false", before: nil, after: map[string]string{"diskless.enable": "false"}},
		{name: "set on a classic topic", before: nil, after: diskless, fixed: true},
		{name: "set false on a diskless topic", before: diskless, after: map[string]string{"diskless.enable": "false"}, fixed: true},
		{name: "deleted from a diskless topic", before: diskless, after: map[string]string{}, fixed: true},
		{name: "dropped by a full replace", before: diskless, after: map[string]string{"retention.ms": "1000"}, fixed: true},
		{name: "remote storage off on a diskless topic", before: diskless,
			after: map[string]string{"diskless.enable": "true", "remote.storage.enable": "false"}, invalid: true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := metadata.ValidateTopicConfigChange(c.before, c.after)
			switch {
			case c.fixed:
				if !errors.Is(err, metadata.ErrInvalidConfig) ||
					!strings.Contains(err.Error(), "diskless.enable cannot be changed after the topic is created") {
					t.Fatalf("err %v, want the diskless.enable refusal", err)
				}
			case c.invalid:
				if !errors.Is(err, metadata.ErrInvalidConfig) || strings.Contains(err.Error(), "cannot be changed") {
					t.Fatalf("err %v, want another ErrInvalidConfig", err)
				}
			case err != nil:
				t.Fatal(err)
			}
		})
	}
}

func TestDisklessAssignment(t *testing.T) {
	a := metadata.DisklessAssignment(3)
	if len(a) != 3 {
		t.Fatalf("%v", a)
	}
	for _, list := range a {
		if list == nil || len(list) != 0 {
			t.Fatalf("%v: want empty, non-nil lists", a)
		}
	}
	if st := metadata.InitialPartitionState(nil); st.Leader != -1 || len(st.ISR) != 0 {
		t.Fatalf("initial state without replicas %+v", st)
	}
}

// testDisklessTopic: a diskless topic is stored with empty replica lists
// and no partition states; its diskless.enable never changes, nothing moves
// its partitions' replicas, and a classic topic cannot have empty lists.
func testDisklessTopic(t *testing.T, e *env) {
	ctx, s := testCtx(t), e.store
	cfg := map[string]string{"diskless.enable": "true"}
	if _, err := s.CreateTopic(ctx, metadata.CreateTopicRequest{Name: "bad", Replicas: [][]int32{{1}}, Configs: cfg}); !errors.Is(err, metadata.ErrInvalidReplicas) {
		t.Fatalf("diskless with replicas: %v, want ErrInvalidReplicas", err)
	}
	if _, err := s.CreateTopic(ctx, metadata.CreateTopicRequest{Name: "bad", Replicas: metadata.DisklessAssignment(2)}); !errors.Is(err, metadata.ErrInvalidReplicas) {
		t.Fatalf("classic without replicas: %v, want ErrInvalidReplicas", err)
	}
	created, err := s.CreateTopic(ctx, metadata.CreateTopicRequest{Name: "dl", Replicas: metadata.DisklessAssignment(3), Configs: cfg})
	if err != nil {
		t.Fatal(err)
	}
	got, err := s.Topic(ctx, "dl")
	if err != nil || !got.Diskless() || len(got.Replicas) != 3 || got.ID != created.ID {
		t.Fatalf("read back %+v, %v", got, err)
	}
	states, err := s.PartitionStates(ctx, created.ID)
	if err != nil || len(states) != 3 || states[0].Leader != -1 || len(states[0].Replicas) != 0 {
		t.Fatalf("states %+v, %v", states, err)
	}

	for _, mutate := range []func(map[string]string){
		func(m map[string]string) { m["diskless.enable"] = "false" },
		func(m map[string]string) { delete(m, "diskless.enable") },
		func(m map[string]string) { clear(m); m["retention.ms"] = "1000" },
	} {
		_, err := s.AlterTopicConfigs(ctx, "dl", func(m map[string]string) error { mutate(m); return nil })
		if !errors.Is(err, metadata.ErrInvalidConfig) || !strings.Contains(err.Error(), "cannot be changed") {
			t.Fatalf("alter: %v, want the diskless.enable refusal", err)
		}
	}
	if after, _ := s.Topic(ctx, "dl"); after.Revision != got.Revision {
		t.Fatalf("a refused alteration wrote the topic: revision %d → %d", got.Revision, after.Revision)
	}
	altered, err := s.AlterTopicConfigs(ctx, "dl", func(m map[string]string) error { m["retention.ms"] = "1000"; return nil })
	if err != nil || !altered.Diskless() || altered.Configs["retention.ms"] != "1000" {
		t.Fatalf("other alteration: %+v, %v", altered, err)
	}

	if _, err := s.AddPartitions(ctx, "dl", [][]int32{{1}}); !errors.Is(err, metadata.ErrInvalidReplicas) {
		t.Fatalf("adding a partition with replicas: %v, want ErrInvalidReplicas", err)
	}
	grown, err := s.AddPartitions(ctx, "dl", metadata.DisklessAssignment(2))
	if err != nil || len(grown.Replicas) != 5 {
		t.Fatalf("adding partitions: %+v, %v", grown, err)
	}
	st := metadata.PartitionState{Leader: 1, Replicas: []int32{1}, ISR: []int32{1}}
	if _, err := s.CASAssignment(ctx, grown, 0, st, nil); !errors.Is(err, metadata.ErrInvalidReplicas) ||
		!strings.Contains(err.Error(), "diskless partitions have no replicas to move") {
		t.Fatalf("reassigning a diskless partition: %v", err)
	}

	classic, err := s.CreateTopic(ctx, metadata.CreateTopicRequest{Name: "classic", Replicas: [][]int32{{1}}})
	if err != nil {
		t.Fatal(err)
	}
	_, err = s.AlterTopicConfigs(ctx, "classic", func(m map[string]string) error { m["diskless.enable"] = "true"; return nil })
	if !errors.Is(err, metadata.ErrInvalidConfig) {
		t.Fatalf("making a classic topic diskless: %v", err)
	}
	if after, _ := s.Topic(ctx, "classic"); after.Revision != classic.Revision || after.Diskless() {
		t.Fatalf("classic topic changed: %+v", after)
	}
}
