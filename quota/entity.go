package quota

import (
	"strings"

	"github.com/strata-log/strata/metadata"
)

// Kind is what a quota limits.
type Kind uint8

const (
	Produce  Kind = iota // producer_byte_rate, bytes/s
	Fetch                // consumer_byte_rate, bytes/s
	Request              // request_percentage, % of one thread
	ColdRead             // cold-read budget, bytes/s (broker flag)
)

// Quota names (Kafka's client quota keys).
const (
	KeyProducerByteRate  = "producer_byte_rate"
	KeyConsumerByteRate  = "consumer_byte_rate"
	KeyRequestPercentage = "request_percentage"
)

// Entity types of DescribeClientQuotas / AlterClientQuotas.
const (
	EntityUser     = "user"
	EntityClientID = "client-id"
)

// configKey is the quota's name in DescribeClientQuotas/AlterClientQuotas;
// empty for ColdRead, which is a broker flag rather than a client quota.
func (k Kind) configKey() string {
	switch k {
	case Produce:
		return KeyProducerByteRate
	case Fetch:
		return KeyConsumerByteRate
	case Request:
		return KeyRequestPercentage
	}
	return ""
}

// Entity is a (user, client-id) entity: each part is a name, the
// <default> of its type, or absent (empty name and not default).
type Entity = metadata.QuotaEntity

// Snapshot is an immutable set of configured quotas: per entity, quota
// name to value. The nil *Snapshot has no quotas.
type Snapshot struct {
	entries map[Entity]map[string]float64
}

// NewSnapshot wraps entries, which the caller must not modify afterwards.
func NewSnapshot(entries map[Entity]map[string]float64) *Snapshot {
	return &Snapshot{entries: entries}
}

// SensorKey names the rate a quota is measured on. Like Kafka's metric
// tags: the parts of the request's (user, client-id) that the matching
// entity names, so a quota on user alice is shared by all her clients
// while one on <default> client-ids applies to each client-id apart.
type SensorKey struct {
	Kind         Kind
	User, Client string
}

// candidate is one step of Kafka's precedence: the entity to look up and
// which request parts its sensor is keyed by.
type candidate struct {
	entity                 Entity
	keepUser, keepClientID bool
}

// precedence lists, most specific first, the entities whose quota
// applies to (user, client), as Kafka's DefaultQuotaCallback:
// /users/u/clients/c, /users/u/clients/<default>, /users/u,
// /users/<default>/clients/c, /users/<default>/clients/<default>,
// /users/<default>, /clients/c, /clients/<default>.
func precedence(user, client string) [8]candidate {
	return [8]candidate{
		{Entity{User: user, ClientID: client}, true, true},
		{Entity{User: user, DefaultClientID: true}, true, true},
		{Entity{User: user}, true, false},
		{Entity{DefaultUser: true, ClientID: client}, true, true},
		{Entity{DefaultUser: true, DefaultClientID: true}, true, true},
		{Entity{DefaultUser: true}, true, false},
		{Entity{ClientID: client}, false, true},
		{Entity{DefaultClientID: true}, false, true},
	}
}

// resolve finds the quota of kind for (user, client): each quota name
// resolves on its own, to the first entity in precedence order that sets
// it. ok is false when none does (the client is not limited).
func (c *Snapshot) resolve(kind Kind, user, client string) (limit float64, key SensorKey, ok bool) {
	if c == nil || len(c.entries) == 0 {
		return 0, SensorKey{}, false
	}
	name := kind.configKey()
	for _, cand := range precedence(user, client) {
		if cand.entity.User == "" && !cand.entity.DefaultUser && cand.keepUser {
			continue // a request always has a user; never match it as absent
		}
		v, found := c.entries[cand.entity][name]
		if !found {
			continue
		}
		key = SensorKey{Kind: kind}
		if cand.keepUser {
			key.User = user
		}
		if cand.keepClientID {
			key.Client = client
		}
		return v, key, true
	}
	return 0, SensorKey{}, false
}

// User is the user entity name of a principal: Kafka's KafkaPrincipal
// name ("User:alice" -> "alice", anonymous -> "ANONYMOUS").
func User(principal string) string {
	if _, name, ok := strings.Cut(principal, ":"); ok {
		return name
	}
	return principal
}
