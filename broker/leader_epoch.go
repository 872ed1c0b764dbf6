package broker

import "github.com/twmb/franz-go/pkg/kerr"

// checkLeaderEpoch implements KIP-320's fencing of a client's view of the
// leader: -1 skips the check; an older epoch is FENCED_LEADER_EPOCH (the
// client's metadata is stale); a newer one is UNKNOWN_LEADER_EPOCH (this
// broker has not caught up with the metadata yet; the client retries).
func checkLeaderEpoch(p *partition, requested int32) int16 {
	if requested < 0 {
		return 0
	}
	switch current := p.leaderEpoch(); {
	case requested < current:
		return kerr.FencedLeaderEpoch.Code
	case requested > current:
		return kerr.UnknownLeaderEpoch.Code
	}
	return 0
}
