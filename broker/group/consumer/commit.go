package consumer

import "fmt"

// Offset commits of a member (KIP-848 with KIP-1251's assignment epochs).
//
// A member's epoch moves on when it reconciles, and a commit it sent at
// its previous epoch may arrive after the heartbeat that moved it (the
// client pipelines both, or commits while revoking). KIP-848 alone
// refuses such a commit (STALE_MEMBER_EPOCH) and the member's progress is
// lost. KIP-1251 accepts it when every partition of the commit has been
// the member's since an epoch at or below the commit's: no other member
// can have owned it at that epoch or later, so the commit cannot be a
// zombie's. The group therefore remembers, per owned partition, the epoch
// at which the member got it (member.assignedAt). It is not persisted:
// after a reload every owned partition counts as got at the member's
// current epoch, which only makes the check strict again for a moment.

// CommitPartition names a partition of a commit by topic name, as the
// commit APIs do.
type CommitPartition struct {
	Topic     string
	Partition int32
}

// CheckCommit validates an offset commit of member id at epoch for
// partitions: ErrUnknownMemberID when the member is not in the group;
// ErrStaleMemberEpoch when epoch is above the member's, or below it while
// some partition was not the member's since an epoch ≤ epoch (or is not
// the member's at all). A commit at the member's epoch is accepted.
func (g *Group) CheckCommit(id string, epoch int32, partitions []CommitPartition) error {
	m := g.members[id]
	switch {
	case m == nil:
		return fmt.Errorf("%w: %q", ErrUnknownMemberID, id)
	case epoch == m.state.Epoch:
		return nil
	case epoch > m.state.Epoch || m.staticLeft():
		return fmt.Errorf("%w: commit at epoch %d, member at %d", ErrStaleMemberEpoch, epoch, m.state.Epoch)
	}
	ids := g.topicIDsByName()
	for _, p := range partitions {
		id, known := ids[p.Topic]
		at, owned := m.assignedAt[TopicPartition{id, p.Partition}]
		if !known || !owned || at > epoch {
			return fmt.Errorf("%w: %s-%d not the member's since epoch %d", ErrStaleMemberEpoch, p.Topic, p.Partition, epoch)
		}
	}
	return nil
}

func (g *Group) topicIDsByName() map[string]TopicID {
	out := make(map[string]TopicID, len(g.topics))
	for id, md := range g.topics {
		out[md.Name] = id
	}
	return out
}

// assignedSince is the member's assignedAt after it moved from prev to
// next: partitions it kept keep their epoch, new ones get next's epoch.
func assignedSince(old map[TopicPartition]int32, prev, next MemberState) map[TopicPartition]int32 {
	out := map[TopicPartition]int32{}
	wasOwned := prev.Owned()
	for _, tp := range next.Owned().Partitions() {
		if at, ok := old[tp]; ok && wasOwned.Contains(tp.Topic, tp.Partition) {
			out[tp] = at
			continue
		}
		out[tp] = next.Epoch
	}
	return out
}
