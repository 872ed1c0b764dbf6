// Package feature holds Kafka's cluster feature levels (KIP-584): which
// levels this build supports, and how an UpdateFeatures request moves the
// cluster's finalized levels. It is pure; the levels are stored in etcd
// (metadata, key "features") and advertised in ApiVersions.
//
// # Rules (Kafka 4's)
//
// An update names a feature, a level and an upgrade type. It is refused
// (ErrInvalidUpdate) when the feature is unknown to this build, the level
// is negative or outside the supported range, the level is lower than the
// finalized one and the type is UPGRADE, or higher and the type is a
// downgrade. Level 0 switches a feature off: it stays stored as 0 so that
// the bootstrap level does not come back, and is not advertised as
// finalized. A request is applied all or nothing.
package feature

import (
	"errors"
	"fmt"
	"maps"
	"slices"
)

// TransactionVersion is the feature clients act on: at level 2 producers
// use KIP-890 part 2 (EndTxn v5, implicit partition adds).
const TransactionVersion = "transaction.version"

// Range is an inclusive range of feature levels.
type Range struct{ Min, Max int16 }

// supported are the levels this build implements, by feature name.
var supported = map[string]Range{TransactionVersion: {Min: 0, Max: 2}}

// Supported returns the supported ranges, by feature name.
func Supported() map[string]Range { return maps.Clone(supported) }

// Names returns the supported feature names in order.
func Names() []string { return slices.Sorted(maps.Keys(supported)) }

// UpgradeType is how an update may move a level (Kafka's codes).
type UpgradeType int8

const (
	Upgrade         UpgradeType = 1 // only up (or unchanged)
	SafeDowngrade   UpgradeType = 2 // only down, losing nothing
	UnsafeDowngrade UpgradeType = 3 // only down, possibly losing metadata
)

// Update asks for one feature's new finalized level.
type Update struct {
	Name  string
	Level int16
	Type  UpgradeType
}

var (
	// ErrInvalidUpdate is an update the rules above refuse
	// (Kafka's INVALID_UPDATE_VERSION).
	ErrInvalidUpdate = errors.New("invalid feature update")
	// ErrDuplicate is a request naming one feature twice (INVALID_REQUEST).
	ErrDuplicate = errors.New("feature named twice")
)

// Apply returns the finalized levels after updates, or the first refused
// update's error and the levels unchanged. current is not modified.
func Apply(current map[string]int16, updates []Update) (map[string]int16, error) {
	next := maps.Clone(current)
	if next == nil {
		next = map[string]int16{}
	}
	seen := make(map[string]bool, len(updates))
	for _, u := range updates {
		if seen[u.Name] {
			return current, fmt.Errorf("%w: %q", ErrDuplicate, u.Name)
		}
		seen[u.Name] = true
		if err := check(u, current[u.Name]); err != nil {
			return current, err
		}
		if _, known := supported[u.Name]; known {
			next[u.Name] = u.Level
		} // an unknown feature at level 0 is off already
	}
	return next, nil
}

// check applies the rules to one update of a feature now at level.
func check(u Update, level int16) error {
	refuse := func(why string) error {
		return fmt.Errorf("%w: invalid update version %d for feature %s. %s", ErrInvalidUpdate, u.Level, u.Name, why)
	}
	r, known := supported[u.Name]
	switch {
	case u.Type < Upgrade || u.Type > UnsafeDowngrade:
		return refuse("The controller does not support the given upgrade type.")
	case u.Level < 0:
		return refuse("A feature version cannot be less than 0.")
	case !known && u.Level > 0:
		return refuse("This broker does not support this feature.")
	case known && (u.Level < r.Min || u.Level > r.Max):
		return refuse(fmt.Sprintf("This broker only supports versions %d-%d.", r.Min, r.Max))
	case u.Level < level && u.Type == Upgrade:
		return refuse("Can't downgrade the version of this feature without setting the upgrade type to either safe or unsafe downgrade.")
	case u.Level > level && u.Type != Upgrade:
		return refuse("Can't downgrade to a newer version.")
	}
	return nil
}

// Finalized returns the levels to advertise as finalized: those above 0,
// as Kafka omits features at level 0.
func Finalized(levels map[string]int16) map[string]int16 {
	out := make(map[string]int16, len(levels))
	for name, l := range levels {
		if l > 0 {
			out[name] = l
		}
	}
	return out
}
