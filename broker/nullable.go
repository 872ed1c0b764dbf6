package broker

import "github.com/twmb/franz-go/pkg/kmsg"

// Kafka's nullable strings arrive and leave as *string; the coordinators
// and the handlers treat null and "" alike.

// derefStr is "" for a null string.
func derefStr(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// optStr is nil for "" (a nullable field left unset).
func optStr(s string) *string {
	if s == "" {
		return nil
	}
	return kmsg.StringPtr(s)
}
