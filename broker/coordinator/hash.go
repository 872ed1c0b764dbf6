package coordinator

// PartitionFor is the partition of key among partitions: Kafka's
// Utils.abs(key.hashCode()) % partitions.
func PartitionFor(key string, partitions int32) int32 {
	h := javaStringHashCode(key)
	if h == -1<<31 {
		h = 0 // Utils.abs maps Integer.MIN_VALUE to 0
	} else if h < 0 {
		h = -h
	}
	return h % partitions
}

// javaStringHashCode is java.lang.String.hashCode: s[0]*31^(n-1) + ... over
// UTF-16 code units, in int32 arithmetic.
func javaStringHashCode(s string) int32 {
	var h int32
	for _, r := range s {
		if r >= 0x10000 {
			r -= 0x10000
			h = 31*h + int32(0xD800+(r>>10))
			h = 31*h + int32(0xDC00+(r&0x3FF))
			continue
		}
		h = 31*h + int32(r)
	}
	return h
}
