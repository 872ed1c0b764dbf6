package quota

// The client-quota admin APIs' quota logic: the DescribeClientQuotas
// filter (KIP-546) and the validation of AlterClientQuotas entries. The
// broker's handlers decode, authorize, call these, and encode.

import (
	"errors"
	"fmt"
	"math"
	"sort"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// ErrBadQuota marks an invalid AlterClientQuotas entry (INVALID_REQUEST).
var ErrBadQuota = errors.New("quota: invalid client quota")

// componentFilter is one component of a DescribeClientQuotas filter.
type componentFilter struct {
	matchType kmsg.QuotasMatchType // 0 exact, 1 default, 2 any
	name      string
}

// Filter is a parsed DescribeClientQuotas filter, by entity type.
type Filter struct {
	byType map[string]componentFilter
	strict bool
}

// ParseFilter parses a DescribeClientQuotas filter: per entity type at
// most one component, matching an exact name (0), the default (1) or any
// (2); strict excludes entities with components of other types.
func ParseFilter(components []kmsg.DescribeClientQuotasRequestComponent, strict bool) (Filter, error) {
	f := Filter{byType: map[string]componentFilter{}, strict: strict}
	for _, c := range components {
		if c.EntityType != EntityUser && c.EntityType != EntityClientID {
			return f, fmt.Errorf("entity type %q is not supported", c.EntityType)
		}
		if _, dup := f.byType[c.EntityType]; dup {
			return f, fmt.Errorf("entity type %q appears more than once", c.EntityType)
		}
		cf := componentFilter{matchType: c.MatchType}
		switch {
		case c.MatchType == 0 && c.Match == nil:
			return f, fmt.Errorf("exact match on %s without a name", c.EntityType)
		case c.MatchType == 0:
			cf.name = *c.Match
		case c.MatchType != 1 && c.MatchType != 2:
			return f, fmt.Errorf("unknown match type %d", c.MatchType)
		case c.Match != nil:
			return f, fmt.Errorf("match type %d on %s takes no name", c.MatchType, c.EntityType)
		}
		f.byType[c.EntityType] = cf
	}
	return f, nil
}

// Matches applies the filter to one stored entity.
func (f Filter) Matches(e Entity) bool {
	parts := map[string]struct {
		present, isDefault bool
		name               string
	}{
		EntityUser:     {e.User != "" || e.DefaultUser, e.DefaultUser, e.User},
		EntityClientID: {e.ClientID != "" || e.DefaultClientID, e.DefaultClientID, e.ClientID},
	}
	for typ, p := range parts {
		cf, filtered := f.byType[typ]
		if !filtered {
			if f.strict && p.present {
				return false
			}
			continue
		}
		switch {
		case !p.present:
			return false
		case cf.matchType == 0 && (p.isDefault || p.name != cf.name):
			return false
		case cf.matchType == 1 && !p.isDefault:
			return false
		}
	}
	return true
}

// DescribedEntry is a DescribeClientQuotas entry for a stored entity,
// its values in key order.
func DescribedEntry(e Entity, values map[string]float64) kmsg.DescribeClientQuotasResponseEntry {
	entry := kmsg.NewDescribeClientQuotasResponseEntry()
	add := func(typ, name string, isDefault bool) {
		c := kmsg.NewDescribeClientQuotasResponseEntryEntity()
		c.Type = typ
		if !isDefault {
			c.Name = kmsg.StringPtr(name)
		}
		entry.Entity = append(entry.Entity, c)
	}
	if e.User != "" || e.DefaultUser {
		add(EntityUser, e.User, e.DefaultUser)
	}
	if e.ClientID != "" || e.DefaultClientID {
		add(EntityClientID, e.ClientID, e.DefaultClientID)
	}
	keys := make([]string, 0, len(values))
	for k := range values {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		v := kmsg.NewDescribeClientQuotasResponseEntryValue()
		v.Key, v.Value = k, values[k]
		entry.Values = append(entry.Values, v)
	}
	return entry
}

// EntityString orders described entities (user first, defaults as
// "<default>").
func EntityString(parts []kmsg.DescribeClientQuotasResponseEntryEntity) string {
	s := ""
	for _, p := range parts {
		name := "<default>"
		if p.Name != nil {
			name = "=" + *p.Name
		}
		s += p.Type + name + ","
	}
	return s
}

// ParseAlterEntity: user and/or client-id components, each once; a
// nil name is the default entity of its type.
func ParseAlterEntity(parts []kmsg.AlterClientQuotasRequestEntryEntity) (Entity, error) {
	var e Entity
	seen := map[string]bool{}
	for _, p := range parts {
		if seen[p.Type] {
			return e, fmt.Errorf("%w: entity type %q appears more than once", ErrBadQuota, p.Type)
		}
		seen[p.Type] = true
		name, isDefault := "", p.Name == nil
		if p.Name != nil {
			if name = *p.Name; name == "" {
				return e, fmt.Errorf("%w: empty %s name (use the default entity)", ErrBadQuota, p.Type)
			}
		}
		switch p.Type {
		case EntityUser:
			e.User, e.DefaultUser = name, isDefault
		case EntityClientID:
			e.ClientID, e.DefaultClientID = name, isDefault
		default:
			return e, fmt.Errorf("%w: entity type %q is not supported", ErrBadQuota, p.Type)
		}
	}
	if err := e.Validate(); err != nil {
		return e, fmt.Errorf("%w: %v", ErrBadQuota, err)
	}
	return e, nil
}

// ParseOps: known keys, each once; set values positive and finite,
// byte rates whole numbers (Kafka's LONG quota types).
func ParseOps(ops []kmsg.AlterClientQuotasRequestEntryOp) (map[string]float64, []string, error) {
	set := map[string]float64{}
	var remove []string
	seen := map[string]bool{}
	for _, op := range ops {
		if seen[op.Key] {
			return nil, nil, fmt.Errorf("%w: quota %q appears more than once", ErrBadQuota, op.Key)
		}
		seen[op.Key] = true
		if err := validValue(op.Key, op.Value, op.Remove); err != nil {
			return nil, nil, err
		}
		if op.Remove {
			remove = append(remove, op.Key)
		} else {
			set[op.Key] = op.Value
		}
	}
	return set, remove, nil
}

func validValue(key string, v float64, remove bool) error {
	switch key {
	case KeyProducerByteRate, KeyConsumerByteRate:
		if !remove && v != math.Trunc(v) {
			return fmt.Errorf("%w: %s must be a whole number of bytes per second, got %v", ErrBadQuota, key, v)
		}
	case KeyRequestPercentage:
	default:
		return fmt.Errorf("%w: unknown quota %q (supported: %s, %s, %s)", ErrBadQuota, key,
			KeyProducerByteRate, KeyConsumerByteRate, KeyRequestPercentage)
	}
	if !remove && (v <= 0 || math.IsNaN(v) || math.IsInf(v, 0)) {
		return fmt.Errorf("%w: %s must be positive, got %v", ErrBadQuota, key, v)
	}
	return nil
}
