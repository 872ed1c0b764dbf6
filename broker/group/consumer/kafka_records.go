package consumer

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
)

// Record types: the int16 that starts every key in __consumer_offsets
// (Kafka's CoordinatorRecordType, the "apiKey" of group-coordinator's
// ConsumerGroup*Key.json; keys 0-2 are the classic protocol's). Part of
// the __consumer_offsets format: never change.
const (
	TypeConsumerGroupMetadata                 int16 = 3
	TypeConsumerGroupPartitionMetadata        int16 = 4
	TypeConsumerGroupMemberMetadata           int16 = 5
	TypeConsumerGroupTargetAssignmentMetadata int16 = 6
	TypeConsumerGroupTargetAssignmentMember   int16 = 7
	TypeConsumerGroupCurrentMemberAssignment  int16 = 8
)

// recordValueVersion is the only value version Kafka 4 defines for these
// records ("validVersions": "0", flexible).
const recordValueVersion int16 = 0

// maxStringLen is Kafka's limit for every string field, compact or not
// (its generated code rejects longer ones on write and read).
const maxStringLen = math.MaxInt16

var (
	// ErrMalformedRecord: a key or value that does not follow its schema
	// (truncated, a length beyond the input, null where the schema forbids
	// it, trailing bytes).
	ErrMalformedRecord = errors.New("consumer: malformed __consumer_offsets record")
	// ErrUnsupportedRecordVersion: a value version other than 0.
	ErrUnsupportedRecordVersion = errors.New("consumer: unsupported record value version")
	// ErrUnencodableRecord: a record EncodeRecord cannot write (unknown
	// type, a string longer than 32767 bytes, a tombstone of a type that
	// is not group-level).
	ErrUnencodableRecord = errors.New("consumer: record cannot be encoded")
)

// GroupRecordTombstone is the tombstone of a group-level record (types 3,
// 4 and 6), which Kafka writes when it deletes the group; member records
// carry their own Tombstone flag. Replay ignores it: deleting the group is
// the coordinator's business.
type GroupRecordTombstone struct{ Type int16 }

func (t GroupRecordTombstone) coordinatorRecordType() int16 { return t.Type }

func isMemberRecordType(t int16) bool {
	return t == TypeConsumerGroupMemberMetadata || t == TypeConsumerGroupTargetAssignmentMember ||
		t == TypeConsumerGroupCurrentMemberAssignment
}

func isGroupRecordType(t int16) bool {
	return t == TypeConsumerGroupMetadata || t == TypeConsumerGroupPartitionMetadata ||
		t == TypeConsumerGroupTargetAssignmentMetadata
}

// EncodeRecord writes r of group groupID as Kafka 4 writes it in
// __consumer_offsets (formats in doc.go). value is nil for tombstones.
func EncodeRecord(groupID string, r Record) (key, value []byte, err error) {
	typ, memberID, tombstone, err := keyParts(r)
	if err != nil {
		return nil, nil, err
	}
	var kw recordWriter
	kw.int16(typ)
	kw.keyString(groupID, "group id")
	if isMemberRecordType(typ) {
		kw.keyString(memberID, "member id")
	}
	if kw.err != nil {
		return nil, nil, kw.err
	}
	if tombstone {
		return kw.buf, nil, nil
	}
	var vw recordWriter
	vw.int16(recordValueVersion)
	encodeValue(&vw, r)
	vw.noTags()
	if vw.err != nil {
		return nil, nil, vw.err
	}
	return kw.buf, vw.buf, nil
}

// keyParts: the record's type, member id (member records) and whether it
// is a tombstone.
func keyParts(r Record) (typ int16, memberID string, tombstone bool, err error) {
	switch r := r.(type) {
	case ConsumerGroupMetadataValue, ConsumerGroupPartitionMetadataValue, ConsumerGroupTargetAssignmentMetadataValue:
		return r.coordinatorRecordType(), "", false, nil
	case ConsumerGroupMemberMetadataValue:
		return r.coordinatorRecordType(), r.MemberID, r.Tombstone, nil
	case ConsumerGroupTargetAssignmentMemberValue:
		return r.coordinatorRecordType(), r.MemberID, r.Tombstone, nil
	case ConsumerGroupCurrentMemberAssignmentValue:
		return r.coordinatorRecordType(), r.MemberID, r.Tombstone, nil
	case GroupRecordTombstone:
		if !isGroupRecordType(r.Type) {
			return 0, "", false, fmt.Errorf("%w: tombstone of record type %d", ErrUnencodableRecord, r.Type)
		}
		return r.Type, "", true, nil
	}
	return 0, "", false, fmt.Errorf("%w: record %T", ErrUnencodableRecord, r)
}

// encodeValue writes r's fields, after the version and before the
// top-level tagged fields. REQUIRES: r passed recordKey and is not a
// tombstone.
func encodeValue(w *recordWriter, r Record) {
	switch r := r.(type) {
	case ConsumerGroupMetadataValue:
		w.int32(r.Epoch)
	case ConsumerGroupPartitionMetadataValue:
		w.uvarint(len(r.Topics) + 1)
		for _, t := range r.Topics {
			w.uuid(t.ID)
			w.compactString(t.Name, "topic name")
			w.int32(t.Partitions)
			w.uvarint(1) // PartitionMetadata: racks unknown, an empty list as Kafka
			w.noTags()
		}
	case ConsumerGroupMemberMetadataValue:
		encodeMemberMetadata(w, r)
	case ConsumerGroupTargetAssignmentMetadataValue:
		w.int32(r.AssignmentEpoch)
	case ConsumerGroupTargetAssignmentMemberValue:
		w.topicPartitions(r.TopicPartitions)
	case ConsumerGroupCurrentMemberAssignmentValue:
		w.int32(r.MemberEpoch)
		w.int32(r.PreviousMemberEpoch)
		w.int8(r.State)
		w.topicPartitions(r.AssignedPartitions)
		w.topicPartitions(r.PartitionsPendingRevocation)
	}
}

func encodeMemberMetadata(w *recordWriter, r ConsumerGroupMemberMetadataValue) {
	w.nullableString(r.InstanceID, "instance id")
	w.nullableString(r.RackID, "rack id")
	w.compactString(r.ClientID, "client id")
	w.compactString(r.ClientHost, "client host")
	w.uvarint(len(r.SubscribedTopicNames) + 1)
	for _, name := range r.SubscribedTopicNames {
		w.compactString(name, "subscribed topic name")
	}
	w.nullableString(r.SubscribedTopicRegex, "subscribed topic regex")
	w.int32(r.RebalanceTimeoutMs)
	w.nullableString(r.ServerAssignor, "server assignor")
}

// DecodeRecord reads a __consumer_offsets key and value (nil: tombstone).
// ok is false, with a nil error, for record types other than 3-8 (the
// classic protocol's, share and streams groups'). A malformed consumer
// record is an error wrapping ErrMalformedRecord (or
// ErrUnsupportedRecordVersion), with ok false. Tagged fields (such as the
// MetadataHash of Kafka 4.1) are skipped; empty lists decode as nil and
// null strings as "".
func DecodeRecord(key, value []byte) (groupID string, r Record, ok bool, err error) {
	if len(key) < 2 {
		return "", nil, false, fmt.Errorf("%w: key of %d bytes", ErrMalformedRecord, len(key))
	}
	typ := int16(binary.BigEndian.Uint16(key))
	if !isMemberRecordType(typ) && !isGroupRecordType(typ) {
		return "", nil, false, nil
	}
	kr := recordReader{buf: key[2:]}
	groupID = kr.keyString("group id")
	var memberID string
	if isMemberRecordType(typ) {
		memberID = kr.keyString("member id")
	}
	kr.end("key")
	if kr.err != nil {
		return "", nil, false, kr.err
	}
	if value == nil {
		return groupID, tombstoneOf(typ, memberID), true, nil
	}
	r, err = decodeValue(typ, memberID, value)
	if err != nil {
		return "", nil, false, fmt.Errorf("record type %d of group %q: %w", typ, groupID, err)
	}
	return groupID, r, true, nil
}

func tombstoneOf(typ int16, memberID string) Record {
	switch typ {
	case TypeConsumerGroupMemberMetadata:
		return ConsumerGroupMemberMetadataValue{MemberID: memberID, Tombstone: true}
	case TypeConsumerGroupTargetAssignmentMember:
		return ConsumerGroupTargetAssignmentMemberValue{MemberID: memberID, Tombstone: true}
	case TypeConsumerGroupCurrentMemberAssignment:
		return ConsumerGroupCurrentMemberAssignmentValue{MemberID: memberID, Tombstone: true}
	}
	return GroupRecordTombstone{Type: typ}
}

func decodeValue(typ int16, memberID string, value []byte) (Record, error) {
	vr := recordReader{buf: value}
	version := vr.int16("value version")
	if vr.err != nil {
		return nil, vr.err
	}
	if version != recordValueVersion {
		return nil, fmt.Errorf("%w: %d", ErrUnsupportedRecordVersion, version)
	}
	var r Record
	switch typ {
	case TypeConsumerGroupMetadata:
		r = ConsumerGroupMetadataValue{Epoch: vr.int32("epoch")}
	case TypeConsumerGroupPartitionMetadata:
		r = ConsumerGroupPartitionMetadataValue{Topics: vr.topicMetadata()}
	case TypeConsumerGroupMemberMetadata:
		r = decodeMemberMetadata(&vr, memberID)
	case TypeConsumerGroupTargetAssignmentMetadata:
		r = ConsumerGroupTargetAssignmentMetadataValue{AssignmentEpoch: vr.int32("assignment epoch")}
	case TypeConsumerGroupTargetAssignmentMember:
		r = ConsumerGroupTargetAssignmentMemberValue{MemberID: memberID, TopicPartitions: vr.topicPartitions()}
	case TypeConsumerGroupCurrentMemberAssignment:
		r = decodeCurrentAssignment(&vr, memberID)
	}
	vr.skipTags("value")
	vr.end("value")
	if vr.err != nil {
		return nil, vr.err
	}
	return r, nil
}

func decodeMemberMetadata(vr *recordReader, memberID string) ConsumerGroupMemberMetadataValue {
	r := ConsumerGroupMemberMetadataValue{MemberID: memberID}
	r.InstanceID = vr.nullableString("instance id")
	r.RackID = vr.nullableString("rack id")
	r.ClientID = vr.compactString("client id")
	r.ClientHost = vr.compactString("client host")
	if n := vr.arrayLen("subscribed topic names", 1); n > 0 {
		r.SubscribedTopicNames = make([]string, n)
		for i := range r.SubscribedTopicNames {
			r.SubscribedTopicNames[i] = vr.compactString("subscribed topic name")
		}
	}
	r.SubscribedTopicRegex = vr.nullableString("subscribed topic regex")
	r.RebalanceTimeoutMs = vr.int32("rebalance timeout")
	r.ServerAssignor = vr.nullableString("server assignor")
	return r
}

func decodeCurrentAssignment(vr *recordReader, memberID string) ConsumerGroupCurrentMemberAssignmentValue {
	r := ConsumerGroupCurrentMemberAssignmentValue{MemberID: memberID}
	r.MemberEpoch = vr.int32("member epoch")
	r.PreviousMemberEpoch = vr.int32("previous member epoch")
	r.State = vr.int8("state")
	r.AssignedPartitions = vr.topicPartitions()
	r.PartitionsPendingRevocation = vr.topicPartitions()
	return r
}

// Minimum encoded sizes of array elements, to bound counts before
// allocating: uuid + empty compact array + empty tags; uuid + empty name +
// int32 + empty array + empty tags; int32 + empty array + empty tags.
const (
	minTopicPartitionsSize  = 16 + 1 + 1
	minTopicMetadataSize    = 16 + 1 + 4 + 1 + 1
	minPartitionRacksSize   = 4 + 1 + 1
	minCompactStringSize    = 1
	int32Size               = 4
	minTaggedFieldEntrySize = 2
)

// topicMetadata reads ConsumerGroupPartitionMetadataValue.Topics; the
// per-partition racks (unused by Strata, and by Kafka after 4.0) are read
// and dropped.
func (r *recordReader) topicMetadata() []TopicMetadata {
	n := r.arrayLen("topics", minTopicMetadataSize)
	if n == 0 {
		return nil
	}
	out := make([]TopicMetadata, n)
	for i := range out {
		out[i].ID = r.uuid("topic id")
		out[i].Name = r.compactString("topic name")
		out[i].Partitions = r.int32("partition count")
		for range r.arrayLen("partition metadata", minPartitionRacksSize) {
			r.int32("partition")
			for range r.arrayLen("racks", minCompactStringSize) {
				r.compactString("rack")
			}
			r.skipTags("partition metadata")
		}
		r.skipTags("topic metadata")
	}
	return out
}

// topicPartitions reads a []TopicPartitions (TopicId uuid, Partitions
// []int32, tagged fields).
func (r *recordReader) topicPartitions() []TopicPartitions {
	n := r.arrayLen("topic partitions", minTopicPartitionsSize)
	if n == 0 {
		return nil
	}
	out := make([]TopicPartitions, n)
	for i := range out {
		out[i].Topic = r.uuid("topic id")
		if m := r.arrayLen("partitions", int32Size); m > 0 {
			out[i].Partitions = make([]int32, m)
			for j := range out[i].Partitions {
				out[i].Partitions[j] = r.int32("partition")
			}
		}
		r.skipTags("topic partitions")
	}
	return out
}

// recordWriter appends Kafka's primitive types; the first error sticks and
// makes later writes no-ops.
type recordWriter struct {
	buf []byte
	err error
}

func (w *recordWriter) int8(v int8)    { w.buf = append(w.buf, byte(v)) }
func (w *recordWriter) int16(v int16)  { w.buf = binary.BigEndian.AppendUint16(w.buf, uint16(v)) }
func (w *recordWriter) int32(v int32)  { w.buf = binary.BigEndian.AppendUint32(w.buf, uint32(v)) }
func (w *recordWriter) uuid(v TopicID) { w.buf = append(w.buf, v[:]...) }

// uvarint: Kafka's unsigned varint is LEB128, as encoding/binary's.
func (w *recordWriter) uvarint(v int) { w.buf = binary.AppendUvarint(w.buf, uint64(v)) }

// noTags writes an empty tagged-field section.
func (w *recordWriter) noTags() { w.buf = append(w.buf, 0) }

func (w *recordWriter) checkLen(s, what string) bool {
	if w.err == nil && len(s) > maxStringLen {
		w.err = fmt.Errorf("%w: %s of %d bytes", ErrUnencodableRecord, what, len(s))
	}
	return w.err == nil
}

// keyString: a non-flexible string (keys are not flexible): int16 length.
func (w *recordWriter) keyString(s, what string) {
	if w.checkLen(s, what) {
		w.int16(int16(len(s)))
		w.buf = append(w.buf, s...)
	}
}

// compactString: uvarint length+1, then the bytes.
func (w *recordWriter) compactString(s, what string) {
	if w.checkLen(s, what) {
		w.uvarint(len(s) + 1)
		w.buf = append(w.buf, s...)
	}
}

// nullableString writes "" as null (uvarint 0), as Kafka stores an unset
// instance id, rack, regex or assignor.
func (w *recordWriter) nullableString(s, what string) {
	if s == "" {
		w.uvarint(0)
		return
	}
	w.compactString(s, what)
}

func (w *recordWriter) topicPartitions(l []TopicPartitions) {
	w.uvarint(len(l) + 1)
	for _, t := range l {
		w.uuid(t.Topic)
		w.uvarint(len(t.Partitions) + 1)
		for _, p := range t.Partitions {
			w.int32(p)
		}
		w.noTags()
	}
}

// recordReader consumes Kafka's primitive types from buf. Every length and
// count is checked against the bytes left before anything is allocated;
// the first error sticks, and later reads return zero values.
type recordReader struct {
	buf []byte
	err error
}

func (r *recordReader) fail(format string, args ...any) {
	if r.err == nil {
		r.err = fmt.Errorf("%w: "+format, append([]any{ErrMalformedRecord}, args...)...)
	}
}

func (r *recordReader) take(n int, what string) []byte {
	if r.err != nil {
		return nil
	}
	if n < 0 || n > len(r.buf) {
		r.fail("%s: %d bytes needed, %d left", what, n, len(r.buf))
		return nil
	}
	b := r.buf[:n:n]
	r.buf = r.buf[n:]
	return b
}

func (r *recordReader) int8(what string) int8 {
	if b := r.take(1, what); b != nil {
		return int8(b[0])
	}
	return 0
}

func (r *recordReader) int16(what string) int16 {
	if b := r.take(2, what); b != nil {
		return int16(binary.BigEndian.Uint16(b))
	}
	return 0
}

func (r *recordReader) int32(what string) int32 {
	if b := r.take(4, what); b != nil {
		return int32(binary.BigEndian.Uint32(b))
	}
	return 0
}

func (r *recordReader) uuid(what string) (id TopicID) {
	copy(id[:], r.take(16, what))
	return id
}

// uvarint reads at most 5 bytes, as Kafka's readUnsignedVarint, into a
// value below 2^31 (lengths and counts are int32 in Kafka).
func (r *recordReader) uvarint(what string) int {
	if r.err != nil {
		return 0
	}
	v, n := binary.Uvarint(r.buf)
	if n <= 0 || n > 5 || v > math.MaxInt32 {
		r.fail("%s: bad unsigned varint", what)
		return 0
	}
	r.buf = r.buf[n:]
	return int(v)
}

func (r *recordReader) keyString(what string) string {
	n := int(r.int16(what))
	if r.err == nil && n < 0 {
		r.fail("%s: null", what)
	}
	return string(r.take(n, what))
}

// compactLen reads a compact string's length (uvarint length+1; 0 is null).
func (r *recordReader) compactLen(what string) (n int, null bool) {
	n = r.uvarint(what) - 1
	if r.err == nil && n > maxStringLen {
		r.fail("%s: length %d", what, n)
	}
	return n, n < 0
}

func (r *recordReader) compactString(what string) string {
	n, null := r.compactLen(what)
	if r.err == nil && null {
		r.fail("%s: null", what)
	}
	return string(r.take(n, what))
}

func (r *recordReader) nullableString(what string) string {
	n, null := r.compactLen(what)
	if null {
		return ""
	}
	return string(r.take(n, what))
}

// arrayLen reads a non-nullable compact array's count and checks that its
// elements, of at least minSize bytes each, fit in what is left.
func (r *recordReader) arrayLen(what string, minSize int) int {
	n := r.uvarint(what) - 1
	if r.err != nil {
		return 0
	}
	if n < 0 {
		r.fail("%s: null", what)
		return 0
	}
	if n > len(r.buf)/minSize {
		r.fail("%s: %d elements in %d bytes", what, n, len(r.buf))
		return 0
	}
	return n
}

// skipTags skips a tagged-field section: count, then per field tag and
// size uvarints and size bytes. No tag is used by what Strata keeps.
func (r *recordReader) skipTags(what string) {
	n := r.uvarint(what + " tagged fields")
	if r.err == nil && n > len(r.buf)/minTaggedFieldEntrySize {
		r.fail("%s: %d tagged fields in %d bytes", what, n, len(r.buf))
		return
	}
	for range n {
		r.uvarint(what + " tag")
		r.take(r.uvarint(what+" tag size"), what+" tagged field")
		if r.err != nil {
			return
		}
	}
}

// end fails unless every byte was read.
func (r *recordReader) end(what string) {
	if r.err == nil && len(r.buf) != 0 {
		r.fail("%s: %d trailing bytes", what, len(r.buf))
	}
}
