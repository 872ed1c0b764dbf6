package feature

import (
	"errors"
	"maps"
	"testing"
)

func TestApply(t *testing.T) {
	at2 := map[string]int16{TransactionVersion: 2}
	cases := []struct {
		name    string
		current map[string]int16
		updates []Update
		want    map[string]int16
		err     error
	}{
		{"upgrade", map[string]int16{TransactionVersion: 1}, []Update{{TransactionVersion, 2, Upgrade}}, at2, nil},
		{"unchanged upgrade", at2, []Update{{TransactionVersion, 2, Upgrade}}, at2, nil},
		{"from nothing", nil, []Update{{TransactionVersion, 1, Upgrade}}, map[string]int16{TransactionVersion: 1}, nil},
		{"safe downgrade", at2, []Update{{TransactionVersion, 1, SafeDowngrade}}, map[string]int16{TransactionVersion: 1}, nil},
		{"switch off", at2, []Update{{TransactionVersion, 0, UnsafeDowngrade}}, map[string]int16{TransactionVersion: 0}, nil},
		{"downgrade typed upgrade", at2, []Update{{TransactionVersion, 1, Upgrade}}, at2, ErrInvalidUpdate},
		{"upgrade typed downgrade", map[string]int16{TransactionVersion: 1}, []Update{{TransactionVersion, 2, SafeDowngrade}}, map[string]int16{TransactionVersion: 1}, ErrInvalidUpdate},
		{"above supported", at2, []Update{{TransactionVersion, 3, Upgrade}}, at2, ErrInvalidUpdate},
		{"negative", at2, []Update{{TransactionVersion, -1, UnsafeDowngrade}}, at2, ErrInvalidUpdate},
		{"unknown type", at2, []Update{{TransactionVersion, 2, 9}}, at2, ErrInvalidUpdate},
		{"unknown feature", at2, []Update{{"group.version", 1, Upgrade}}, at2, ErrInvalidUpdate},
		{"unknown feature off", at2, []Update{{"group.version", 0, Upgrade}}, at2, nil},
		{"all or nothing", map[string]int16{TransactionVersion: 1},
			[]Update{{TransactionVersion, 2, Upgrade}, {"metadata.version", 30, Upgrade}}, map[string]int16{TransactionVersion: 1}, ErrInvalidUpdate},
		{"duplicate", at2, []Update{{TransactionVersion, 2, Upgrade}, {TransactionVersion, 1, SafeDowngrade}}, at2, ErrDuplicate},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			before := maps.Clone(c.current)
			got, err := Apply(c.current, c.updates)
			if !errors.Is(err, c.err) {
				t.Fatalf("err %v, want %v", err, c.err)
			}
			if !maps.Equal(got, c.want) {
				t.Fatalf("levels %v, want %v", got, c.want)
			}
			if !maps.Equal(c.current, before) {
				t.Fatalf("current modified: %v, was %v", c.current, before)
			}
		})
	}
}

func TestFinalizedOmitsLevelZero(t *testing.T) {
	got := Finalized(map[string]int16{TransactionVersion: 0, "x": 3})
	if want := map[string]int16{"x": 3}; !maps.Equal(got, want) {
		t.Fatalf("finalized %v, want %v", got, want)
	}
}
