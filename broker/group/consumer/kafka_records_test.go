package consumer

import (
	"bytes"
	"encoding/hex"
	"errors"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
)

// hx decodes hex written with spaces and "|" between fields.
func hx(t testing.TB, parts ...string) []byte {
	t.Helper()
	s := strings.NewReplacer(" ", "", "|", "").Replace(strings.Join(parts, ""))
	b, err := hex.DecodeString(s)
	if err != nil {
		t.Fatalf("bad hex %q: %v", s, err)
	}
	return b
}

const (
	uuid1 = "00000000000000000000000000000001"
	uuid2 = "00000000000000000000000000000002"
)

type goldenRecord struct {
	name       string
	rec        Record
	key, value []byte // value nil: tombstone
}

// goldenRecords are built by hand from Kafka's JSON schemas (doc.go): one
// per type, with every field distinct so a swapped field is caught, and
// the member tombstones. Group "g", member "m1".
func goldenRecords(t testing.TB) []goldenRecord {
	groupKey := func(typ string) []byte { return hx(t, typ, "| 0001 67") }
	memberKey := func(typ string) []byte { return hx(t, typ, "| 0001 67 | 0002 6d31") }
	return []goldenRecord{
		{"metadata", ConsumerGroupMetadataValue{Epoch: 5}, groupKey("0003"),
			hx(t, "0000 | 00000005 | 00")},
		{"partition metadata", ConsumerGroupPartitionMetadataValue{Topics: []TopicMetadata{{ID: tid(1), Name: "t1", Partitions: 3}}},
			groupKey("0004"),
			hx(t, "0000 | 02 |", uuid1, "| 03 7431 | 00000003 | 01 | 00 | 00")},
		{"member metadata", ConsumerGroupMemberMetadataValue{MemberID: "m1", InstanceID: "i", ClientID: "c", ClientHost: "/h",
			SubscribedTopicNames: []string{"t1", "t2"}, RebalanceTimeoutMs: 1000, ServerAssignor: "uniform"},
			memberKey("0005"),
			hx(t, "0000 | 02 69 | 00 | 02 63 | 03 2f68 | 03 037431 037432 | 00 | 000003e8 | 08 756e69666f726d | 00")},
		{"target assignment metadata", ConsumerGroupTargetAssignmentMetadataValue{AssignmentEpoch: 7}, groupKey("0006"),
			hx(t, "0000 | 00000007 | 00")},
		{"target assignment member", ConsumerGroupTargetAssignmentMemberValue{MemberID: "m1",
			TopicPartitions: []TopicPartitions{{tid(1), []int32{0, 2}}}},
			memberKey("0007"),
			hx(t, "0000 | 02 |", uuid1, "| 03 00000000 00000002 | 00 | 00")},
		{"current member assignment", ConsumerGroupCurrentMemberAssignmentValue{MemberID: "m1", MemberEpoch: 4,
			PreviousMemberEpoch: 3, State: 1, AssignedPartitions: []TopicPartitions{{tid(1), []int32{1}}},
			PartitionsPendingRevocation: []TopicPartitions{{tid(2), []int32{0}}}},
			memberKey("0008"),
			hx(t, "0000 | 00000004 | 00000003 | 01 | 02 ", uuid1, " 02 00000001 00 | 02 ", uuid2, " 02 00000000 00 | 00")},
		{"member metadata tombstone", ConsumerGroupMemberMetadataValue{MemberID: "m1", Tombstone: true}, memberKey("0005"), nil},
		{"target member tombstone", ConsumerGroupTargetAssignmentMemberValue{MemberID: "m1", Tombstone: true}, memberKey("0007"), nil},
		{"current assignment tombstone", ConsumerGroupCurrentMemberAssignmentValue{MemberID: "m1", Tombstone: true}, memberKey("0008"), nil},
		{"metadata tombstone", GroupRecordTombstone{Type: 3}, groupKey("0003"), nil},
		{"partition metadata tombstone", GroupRecordTombstone{Type: 4}, groupKey("0004"), nil},
		{"target metadata tombstone", GroupRecordTombstone{Type: 6}, groupKey("0006"), nil},
	}
}

func TestRecordTypesMatchKafka(t *testing.T) {
	for _, c := range []struct {
		rec  Record
		want int16
	}{
		{ConsumerGroupMetadataValue{}, TypeConsumerGroupMetadata},
		{ConsumerGroupPartitionMetadataValue{}, TypeConsumerGroupPartitionMetadata},
		{ConsumerGroupMemberMetadataValue{}, TypeConsumerGroupMemberMetadata},
		{ConsumerGroupTargetAssignmentMetadataValue{}, TypeConsumerGroupTargetAssignmentMetadata},
		{ConsumerGroupTargetAssignmentMemberValue{}, TypeConsumerGroupTargetAssignmentMember},
		{ConsumerGroupCurrentMemberAssignmentValue{}, TypeConsumerGroupCurrentMemberAssignment},
	} {
		rec, want := c.rec, c.want
		if got := rec.coordinatorRecordType(); got != want {
			t.Errorf("%T: type %d, Kafka's is %d", rec, got, want)
		}
	}
}

func TestEncodeRecordGolden(t *testing.T) {
	for _, g := range goldenRecords(t) {
		key, value, err := EncodeRecord("g", g.rec)
		if err != nil {
			t.Fatalf("%s: %v", g.name, err)
		}
		if !bytes.Equal(key, g.key) || !bytes.Equal(value, g.value) || (value == nil) != (g.value == nil) {
			t.Errorf("%s:\n key   %x\n want  %x\n value %x\n want  %x", g.name, key, g.key, value, g.value)
		}
	}
}

func TestDecodeRecordGolden(t *testing.T) {
	for _, g := range goldenRecords(t) {
		group, rec, ok, err := DecodeRecord(g.key, g.value)
		if err != nil || !ok || group != "g" {
			t.Fatalf("%s: group %q ok %v err %v", g.name, group, ok, err)
		}
		if !reflect.DeepEqual(rec, g.rec) {
			t.Errorf("%s:\n got  %#v\n want %#v", g.name, rec, g.rec)
		}
	}
}

// normalizeRecord maps empty lists to nil, as DecodeRecord returns them.
func normalizeRecord(r Record) Record {
	tps := func(l []TopicPartitions) []TopicPartitions {
		if len(l) == 0 {
			return nil
		}
		out := make([]TopicPartitions, len(l))
		for i, t := range l {
			out[i] = TopicPartitions{Topic: t.Topic}
			if len(t.Partitions) > 0 {
				out[i].Partitions = t.Partitions
			}
		}
		return out
	}
	switch v := r.(type) {
	case ConsumerGroupPartitionMetadataValue:
		if len(v.Topics) == 0 {
			v.Topics = nil
		}
		return v
	case ConsumerGroupMemberMetadataValue:
		if len(v.SubscribedTopicNames) == 0 {
			v.SubscribedTopicNames = nil
		}
		return v
	case ConsumerGroupTargetAssignmentMemberValue:
		v.TopicPartitions = tps(v.TopicPartitions)
		return v
	case ConsumerGroupCurrentMemberAssignmentValue:
		v.AssignedPartitions, v.PartitionsPendingRevocation = tps(v.AssignedPartitions), tps(v.PartitionsPendingRevocation)
		return v
	}
	return r
}

func TestRecordRoundTrip(t *testing.T) {
	recs := []Record{
		ConsumerGroupMetadataValue{Epoch: -1},
		ConsumerGroupPartitionMetadataValue{},
		ConsumerGroupPartitionMetadataValue{Topics: []TopicMetadata{{ID: tid(9), Name: "", Partitions: 0},
			{ID: tid(1), Name: strings.Repeat("x", maxStringLen), Partitions: 1 << 30}}},
		ConsumerGroupMemberMetadataValue{MemberID: "", SubscribedTopicNames: []string{}},
		ConsumerGroupMemberMetadataValue{MemberID: "m", InstanceID: "i", RackID: "r", ClientID: "c", ClientHost: "h",
			SubscribedTopicNames: []string{"a", "", "b"}, SubscribedTopicRegex: "^a.*", RebalanceTimeoutMs: -1, ServerAssignor: "range"},
		ConsumerGroupTargetAssignmentMetadataValue{AssignmentEpoch: -2147483648},
		ConsumerGroupTargetAssignmentMemberValue{MemberID: "m", TopicPartitions: []TopicPartitions{}},
		ConsumerGroupTargetAssignmentMemberValue{MemberID: "m", TopicPartitions: []TopicPartitions{{tid(1), nil}, {tid(2), []int32{0, 1, 2}}}},
		ConsumerGroupCurrentMemberAssignmentValue{MemberID: "m", MemberEpoch: -2, PreviousMemberEpoch: 9, State: 3,
			AssignedPartitions: []TopicPartitions{{tid(3), []int32{5}}}, PartitionsPendingRevocation: []TopicPartitions{}},
	}
	for _, g := range goldenRecords(t) {
		recs = append(recs, g.rec)
	}
	for _, r := range recs {
		key, value, err := EncodeRecord("group-1", r)
		if err != nil {
			t.Fatalf("%#v: %v", r, err)
		}
		group, got, ok, err := DecodeRecord(key, value)
		if err != nil || !ok || group != "group-1" || !reflect.DeepEqual(got, normalizeRecord(r)) {
			t.Errorf("round trip of %#v: group %q ok %v err %v\n got %#v", r, group, ok, err, got)
		}
	}
}

// A group's records, through the encoding, replay into the same group.
func TestReplayThroughKafkaRecords(t *testing.T) {
	g := newTestGroup(t, Config{}, map[byte]int32{1: 4, 2: 3})
	mustBeat(t, g, joinReq("a", "t1", "t2"), 0)
	mustBeat(t, g, joinReq("b", "t1"), 0)
	mustBeat(t, g, beat("a", 1, nil), 0)
	mustBeat(t, g, joinReq("c", "t2"), 0)
	mustBeat(t, g, beat("c", LeaveEpoch, nil), 0)
	var decoded []Record
	for _, r := range g.TakeRecords() {
		key, value, err := EncodeRecord("g", r)
		if err != nil {
			t.Fatal(err)
		}
		group, rec, ok, err := DecodeRecord(key, value)
		if err != nil || !ok || group != "g" {
			t.Fatalf("decode %#v: %q %v %v", r, group, ok, err)
		}
		decoded = append(decoded, rec)
	}
	r, err := Replay("g", g.cfg, decoded, 0)
	if err != nil {
		t.Fatal(err)
	}
	if dumpGroup(r) != dumpGroup(g) {
		t.Fatalf("replay differs:\n%s\n%s", dumpGroup(r), dumpGroup(g))
	}
}

func TestDecodeOtherRecordTypes(t *testing.T) {
	for _, typ := range []string{"0000", "0001", "0002", "0009", "000f", "ffff"} {
		group, rec, ok, err := DecodeRecord(hx(t, typ, "0001 67"), hx(t, "0003 00"))
		if ok || err != nil || rec != nil || group != "" {
			t.Errorf("type %s: %q %v %v %v", typ, group, rec, ok, err)
		}
	}
}

// Tagged fields of later Kafka versions are skipped: MetadataHash (tag 0)
// and CreationTimeMs (tag 1) of the metadata value, AssignmentEpochs (tag
// 0) of a TopicPartitions, ClassicMemberMetadata (tag 0) of a member.
func TestDecodeSkipsTaggedFields(t *testing.T) {
	cases := []struct {
		key, value []byte
		want       Record
	}{
		{hx(t, "0003 0001 67"), hx(t, "0000 | 00000005 | 02 | 00 08 0102030405060708 | 01 08 0000019a00000000"),
			ConsumerGroupMetadataValue{Epoch: 5}},
		{hx(t, "0008 0001 67 0002 6d31"),
			hx(t, "0000 | 00000004 | 00000003 | 00 | 02 ", uuid1, " 02 00000001 | 01 00 05 02 00000004 | 01 | 00"),
			ConsumerGroupCurrentMemberAssignmentValue{MemberID: "m1", MemberEpoch: 4, PreviousMemberEpoch: 3,
				AssignedPartitions: []TopicPartitions{{tid(1), []int32{1}}}}},
		{hx(t, "0005 0001 67 0002 6d31"),
			hx(t, "0000 | 00 | 00 | 01 | 01 | 01 | 00 | 00002710 | 00 | 01 00 06 00002710 01 00"),
			ConsumerGroupMemberMetadataValue{MemberID: "m1", RebalanceTimeoutMs: 10000}},
		{hx(t, "0004 0001 67"), // racks of partitions 0 and 1
			hx(t, "0000 | 02 |", uuid2, "| 02 61 | 00000002 | 03 | 00000000 02 03 7231 00 | 00000001 01 00 | 00 | 00"),
			ConsumerGroupPartitionMetadataValue{Topics: []TopicMetadata{{ID: tid(2), Name: "a", Partitions: 2}}}},
	}
	for _, c := range cases {
		_, rec, ok, err := DecodeRecord(c.key, c.value)
		if err != nil || !ok || !reflect.DeepEqual(rec, c.want) {
			t.Errorf("%x: %#v %v %v, want %#v", c.value, rec, ok, err, c.want)
		}
	}
}

func TestDecodeRejectsTruncated(t *testing.T) {
	for _, g := range goldenRecords(t) {
		for n := range len(g.key) {
			if _, _, ok, err := DecodeRecord(g.key[:n], g.value); !errors.Is(err, ErrMalformedRecord) || ok {
				t.Errorf("%s: key prefix %x: ok %v err %v", g.name, g.key[:n], ok, err)
			}
		}
		for n := range len(g.value) {
			if _, _, ok, err := DecodeRecord(g.key, g.value[:n]); !errors.Is(err, ErrMalformedRecord) || ok {
				t.Errorf("%s: value prefix %x: ok %v err %v", g.name, g.value[:n], ok, err)
			}
		}
	}
}

func TestDecodeRejectsMalformed(t *testing.T) {
	memberKey := hx(t, "0007 0001 67 0002 6d31")
	cases := []struct {
		name       string
		key, value []byte
		want       error
	}{
		{"trailing key byte", hx(t, "0003 0001 67 00"), hx(t, "0000 00000005 00"), ErrMalformedRecord},
		{"trailing value byte", hx(t, "0003 0001 67"), hx(t, "0000 00000005 00 00"), ErrMalformedRecord},
		{"null group id", hx(t, "0003 ffff"), hx(t, "0000 00000005 00"), ErrMalformedRecord},
		{"group id beyond key", hx(t, "0003 7fff 67"), nil, ErrMalformedRecord},
		{"value version 1", hx(t, "0003 0001 67"), hx(t, "0001 00000005 00"), ErrUnsupportedRecordVersion},
		{"empty value", hx(t, "0003 0001 67"), []byte{}, ErrMalformedRecord},
		{"huge topic count", memberKey, hx(t, "0000 ffffffff07 00"), ErrMalformedRecord},
		{"count above the bytes", memberKey, hx(t, "0000 03", uuid1, "01 00 00"), ErrMalformedRecord},
		{"huge partition count", memberKey, hx(t, "0000 02", uuid1, "ffffff0f 00 00"), ErrMalformedRecord},
		{"six-byte varint", memberKey, hx(t, "0000 8080808080 01 00"), ErrMalformedRecord},
		{"null topic list", memberKey, hx(t, "0000 00 00"), ErrMalformedRecord},
		{"string over 32767", hx(t, "0005 0001 67 0002 6d31"), hx(t, "0000 00 00 818002 00"), ErrMalformedRecord},
		{"null client id", hx(t, "0005 0001 67 0002 6d31"), hx(t, "0000 00 00 00 01 01 00 00000000 00 00"), ErrMalformedRecord},
		{"huge tag count", hx(t, "0003 0001 67"), hx(t, "0000 00000005 ffffffff07"), ErrMalformedRecord},
		{"tag beyond value", hx(t, "0003 0001 67"), hx(t, "0000 00000005 01 00 7f 00"), ErrMalformedRecord},
	}
	for _, c := range cases {
		if _, rec, ok, err := DecodeRecord(c.key, c.value); !errors.Is(err, c.want) || ok || rec != nil {
			t.Errorf("%s: %v %v %v, want %v", c.name, rec, ok, err, c.want)
		}
	}
}

func TestEncodeRecordRejects(t *testing.T) {
	long := strings.Repeat("x", maxStringLen+1)
	for _, c := range []struct {
		group string
		rec   Record
	}{
		{"g", nil},
		{"g", &ConsumerGroupMetadataValue{}},
		{"g", GroupRecordTombstone{Type: 5}},
		{"g", GroupRecordTombstone{Type: 2}},
		{long, ConsumerGroupMetadataValue{}},
		{"g", ConsumerGroupMemberMetadataValue{MemberID: long}},
		{"g", ConsumerGroupMemberMetadataValue{MemberID: "m", ClientHost: long}},
		{"g", ConsumerGroupPartitionMetadataValue{Topics: []TopicMetadata{{Name: long}}}},
	} {
		if k, v, err := EncodeRecord(c.group, c.rec); !errors.Is(err, ErrUnencodableRecord) || k != nil || v != nil {
			t.Errorf("%T: %x %x %v", c.rec, k, v, err)
		}
	}
}

// FuzzDecodeRecord: decoding never panics, and whatever decodes encodes
// back to bytes that decode to the same record and re-encode identically.
func FuzzDecodeRecord(f *testing.F) {
	for _, g := range goldenRecords(f) {
		f.Add(g.key, g.value, g.value == nil)
	}
	f.Add(hx(f, "0003 0001 67"), hx(f, "0000 00000005 02 00 08 0102030405060708 01 00"), false)
	f.Add(hx(f, "0007 0001 67 0002 6d31"), hx(f, "0000 ffffffff07 00"), false)
	f.Fuzz(func(t *testing.T, key, value []byte, tombstone bool) {
		if tombstone {
			value = nil
		}
		checkDecodeProperty(t, key, value)
	})
}

// checkDecodeProperty: decoding never panics; a failed decode returns no
// record; what decodes encodes back to bytes that decode to the same
// record and re-encode identically.
func checkDecodeProperty(t *testing.T, key, value []byte) {
	t.Helper()
	group, rec, ok, err := DecodeRecord(key, value)
	if err != nil || !ok {
		if rec != nil || (ok && err != nil) {
			t.Fatalf("ok %v err %v with record %#v", ok, err, rec)
		}
		return
	}
	k2, v2, err := EncodeRecord(group, rec)
	if err != nil {
		t.Fatalf("re-encoding %#v: %v", rec, err)
	}
	group2, rec2, ok, err := DecodeRecord(k2, v2)
	if err != nil || !ok || group2 != group || !reflect.DeepEqual(rec2, rec) {
		t.Fatalf("decode of encode of %#v: %q %#v %v %v", rec, group2, rec2, ok, err)
	}
	if k3, v3, _ := EncodeRecord(group2, rec2); !bytes.Equal(k3, k2) || !bytes.Equal(v3, v2) {
		t.Fatalf("re-encoding is not stable: %x/%x then %x/%x", k2, v2, k3, v3)
	}
}

// Random corruptions of the golden records (byte flips, cuts, insertions)
// go through the fuzz property in every test run.
func TestDecodeRandomCorruption(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	mutate := func(b []byte) []byte {
		b = bytes.Clone(b)
		switch rng.IntN(3) {
		case 0:
			if len(b) > 0 {
				b[rng.IntN(len(b))] = byte(rng.IntN(256))
			}
		case 1:
			b = b[:rng.IntN(len(b)+1)]
		default:
			at := rng.IntN(len(b) + 1)
			b = append(b[:at:at], append([]byte{byte(rng.IntN(256))}, b[at:]...)...)
		}
		return b
	}
	goldens, decoded := goldenRecords(t), 0
	for range 20000 {
		g := goldens[rng.IntN(len(goldens))]
		key, value := g.key, g.value
		for range 1 + rng.IntN(3) {
			if rng.IntN(4) == 0 {
				key = mutate(key)
			} else if value != nil {
				value = mutate(value)
			}
		}
		if _, _, ok, _ := DecodeRecord(key, value); ok {
			decoded++
		}
		checkDecodeProperty(t, key, value)
	}
	if decoded == 0 {
		t.Fatal("no corrupted record decoded: the property was never exercised")
	}
}
