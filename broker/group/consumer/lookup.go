package consumer

// MemberRegex is the subscribed regular expression of member id ("" when
// it subscribed by names); ok is false when the member is not known. The
// coordinator resolves it again on heartbeats that leave the subscription
// unchanged, so that topics created later are picked up.
func (g *Group) MemberRegex(id string) (regex string, ok bool) {
	m := g.members[id]
	if m == nil {
		return "", false
	}
	return m.sub.Regex, true
}

// MemberEpoch is the epoch of member id; ok is false when it is not known.
// Offset commits of a consumer-protocol group carry it as their
// generation.
func (g *Group) MemberEpoch(id string) (epoch int32, ok bool) {
	m := g.members[id]
	if m == nil {
		return 0, false
	}
	return m.state.Epoch, true
}
