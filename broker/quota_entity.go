package broker

import (
	"strings"

	"github.com/strata-log/strata/metadata"
)

// Kafka client-quota entities (KIP-55, KIP-546) and their precedence.

// Quota names (Kafka's client quota keys).
const (
	quotaKeyProducerByteRate  = "producer_byte_rate"
	quotaKeyConsumerByteRate  = "consumer_byte_rate"
	quotaKeyRequestPercentage = "request_percentage"
)

// Entity types of DescribeClientQuotas / AlterClientQuotas.
const (
	quotaEntityUser     = "user"
	quotaEntityClientID = "client-id"
)

// quotaEntity is a (user, client-id) entity: each part is a name, the
// <default> of its type, or absent (empty name and not default).
type quotaEntity = metadata.QuotaEntity

// quotaConfig is an immutable snapshot of the configured quotas.
type quotaConfig struct {
	entries map[quotaEntity]map[string]float64
}

// sensorKey names the rate a quota is measured on. Like Kafka's metric
// tags: the parts of the request's (user, client-id) that the matching
// entity names, so a quota on user alice is shared by all her clients
// while one on <default> client-ids applies to each client-id apart.
type sensorKey struct {
	kind         quotaKind
	user, client string
}

// quotaCandidate is one step of Kafka's precedence: the entity to look up
// and which request parts its sensor is keyed by.
type quotaCandidate struct {
	entity                 quotaEntity
	keepUser, keepClientID bool
}

// quotaPrecedence lists, most specific first, the entities whose quota
// applies to (user, client), as Kafka's DefaultQuotaCallback:
// /users/u/clients/c, /users/u/clients/<default>, /users/u,
// /users/<default>/clients/c, /users/<default>/clients/<default>,
// /users/<default>, /clients/c, /clients/<default>.
func quotaPrecedence(user, client string) [8]quotaCandidate {
	return [8]quotaCandidate{
		{quotaEntity{User: user, ClientID: client}, true, true},
		{quotaEntity{User: user, DefaultClientID: true}, true, true},
		{quotaEntity{User: user}, true, false},
		{quotaEntity{DefaultUser: true, ClientID: client}, true, true},
		{quotaEntity{DefaultUser: true, DefaultClientID: true}, true, true},
		{quotaEntity{DefaultUser: true}, true, false},
		{quotaEntity{ClientID: client}, false, true},
		{quotaEntity{DefaultClientID: true}, false, true},
	}
}

// resolve finds the quota of kind for (user, client): each quota name
// resolves on its own, to the first entity in precedence order that sets
// it. ok is false when none does (the client is not limited).
func (c *quotaConfig) resolve(kind quotaKind, user, client string) (limit float64, key sensorKey, ok bool) {
	if c == nil || len(c.entries) == 0 {
		return 0, sensorKey{}, false
	}
	name := kind.configKey()
	for _, cand := range quotaPrecedence(user, client) {
		if cand.entity.User == "" && !cand.entity.DefaultUser && cand.keepUser {
			continue // a request always has a user; never match it as absent
		}
		v, found := c.entries[cand.entity][name]
		if !found {
			continue
		}
		key = sensorKey{kind: kind}
		if cand.keepUser {
			key.user = user
		}
		if cand.keepClientID {
			key.client = client
		}
		return v, key, true
	}
	return 0, sensorKey{}, false
}

// quotaUser is the user entity name of a principal: Kafka's
// KafkaPrincipal name ("User:alice" -> "alice", anonymous -> "ANONYMOUS").
func quotaUser(principal string) string {
	if _, name, ok := strings.Cut(principal, ":"); ok {
		return name
	}
	return principal
}
