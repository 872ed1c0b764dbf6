package reassign

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strings"
)

// Broker is a broker that may hold replicas.
type Broker struct {
	ID   int32
	Rack string // "": none, the broker is a rack of its own
}

// Partition is one partition as Metadata shows it.
type Partition struct {
	Topic     string
	Partition int32
	// Replicas in preference order: Replicas[0] is the preferred leader.
	Replicas []int32
	// Leader is the current leader (-1: none). It is kept as the
	// preferred leader when leaderships are reordered and it qualifies.
	Leader int32
}

// Cluster is what a plan is made from.
type Cluster struct {
	Brokers    []Broker
	Partitions []Partition
}

// Move is one partition's reassignment: From are its replicas now, To the
// replicas wanted, To[0] the new preferred leader. len(To) == len(From).
type Move struct {
	Topic     string
	Partition int32
	From, To  []int32
}

// ErrCannotDrain is returned by Drain when some partition has more
// replicas than there are other brokers to hold them.
var ErrCannotDrain = errors.New("reassign: not enough other brokers to drain")

// Balance plans the fewest moves that bring every broker's replica count
// and preferred leadership count within ±1 of the even share, spreading
// each partition over racks (see doc.go). A balanced cluster gives none.
func Balance(c Cluster) []Move {
	p := newPlanner(c, nil)
	p.spreadRacks()
	p.balanceReplicas()
	p.balanceLeaders(nil)
	return p.moves()
}

// BalanceEachTopic balances every topic on its own (Balance over that
// topic's partitions): each topic's replicas and preferred leaderships end
// within ±1 of its even share per broker, which is what its producers and
// consumers feel, and the cluster as a whole within ±1 per topic. Moves
// come in topic order.
func BalanceEachTopic(c Cluster) []Move {
	byTopic := map[string][]Partition{}
	var names []string
	for _, p := range c.Partitions {
		if _, ok := byTopic[p.Topic]; !ok {
			names = append(names, p.Topic)
		}
		byTopic[p.Topic] = append(byTopic[p.Topic], p)
	}
	slices.Sort(names)
	var moves []Move
	for _, name := range names {
		moves = append(moves, Balance(Cluster{Brokers: c.Brokers, Partitions: byTopic[name]})...)
	}
	return moves
}

// Drain plans moving every replica off node onto the other brokers of c,
// each to the least loaded broker that keeps the partition's rack spread,
// and hands node's preferred leaderships to the moved partitions' least
// leading replicas. Partitions without a replica on node do not move.
func Drain(c Cluster, node int32) ([]Move, error) {
	p := newPlanner(c, &node)
	moved := map[*partitionPlan]bool{}
	for _, part := range p.partitions {
		if !slices.Contains(part.replicas, node) {
			continue
		}
		wasLeader := part.replicas[0] == node
		if err := p.evacuate(part, node); err != nil {
			return nil, err
		}
		if wasLeader {
			p.promoteLeastLeading(part)
		}
		moved[part] = true
	}
	p.balanceLeaders(moved)
	return p.moves(), nil
}

// planner is the working state of one plan. It owns copies of the
// partitions' replica lists; counts are kept for the eligible brokers only.
type planner struct {
	eligible []int32          // brokers that may receive replicas, sorted
	rackOf   map[int32]string // every broker named anywhere; unknown ones are racks of their own
	racks    int              // distinct racks among the eligible brokers

	partitions []*partitionPlan // sorted by topic, partition
	replicas   map[int32]int    // eligible broker → replicas it holds in the plan
	leaders    map[int32]int    // eligible broker → partitions it is first in
}

// partitionPlan is one partition: as given, and as planned.
type partitionPlan struct {
	given    Partition
	replicas []int32 // the plan; no broker twice
}

// newPlanner builds the state; exclude, when set, is a broker that may not
// receive replicas (the one being drained).
func newPlanner(c Cluster, exclude *int32) *planner {
	p := &planner{rackOf: map[int32]string{}, replicas: map[int32]int{}, leaders: map[int32]int{}}
	racks := map[string]bool{}
	for _, b := range c.Brokers {
		p.rackOf[b.ID] = rackName(b)
		if exclude != nil && b.ID == *exclude {
			continue
		}
		if _, dup := p.replicas[b.ID]; dup {
			continue
		}
		p.eligible = append(p.eligible, b.ID)
		p.replicas[b.ID], p.leaders[b.ID] = 0, 0
		racks[rackName(b)] = true
	}
	slices.Sort(p.eligible)
	p.racks = len(racks)
	for _, given := range c.Partitions {
		part := &partitionPlan{given: given, replicas: slices.Clone(given.Replicas)}
		p.partitions = append(p.partitions, part)
		for i, id := range part.replicas {
			if _, ok := p.rackOf[id]; !ok {
				p.rackOf[id] = fmt.Sprintf("broker %d", id)
			}
			if p.isEligible(id) {
				p.replicas[id]++
				if i == 0 {
					p.leaders[id]++
				}
			}
		}
	}
	slices.SortFunc(p.partitions, func(a, b *partitionPlan) int {
		return cmp.Or(strings.Compare(a.given.Topic, b.given.Topic), cmp.Compare(a.given.Partition, b.given.Partition))
	})
	return p
}

// rackName is the broker's rack; a broker without one is a rack of its own.
func rackName(b Broker) string {
	if b.Rack == "" {
		return fmt.Sprintf("broker %d", b.ID)
	}
	return "rack " + b.Rack
}

func (p *planner) isEligible(id int32) bool { _, ok := p.replicas[id]; return ok }

// band is the range [lo, hi] of counts within ±1 of total/brokers:
// lo = ceil(share-1), hi = floor(share+1).
func band(total, brokers int) (lo, hi int) {
	if brokers == 0 {
		return 0, 0
	}
	if total > 0 {
		lo = (total - 1) / brokers
	}
	return lo, total/brokers + 1
}

// maxPerRack is how many of part's replicas one rack may hold.
func (p *planner) maxPerRack(part *partitionPlan) int {
	return max(1, (len(part.replicas)+p.racks-1)/max(1, p.racks))
}

// onRack counts part's replicas on rack, not counting broker except.
func (p *planner) onRack(part *partitionPlan, rack string, except int32) int {
	n := 0
	for _, id := range part.replicas {
		if id != except && p.rackOf[id] == rack {
			n++
		}
	}
	return n
}

// canTake reports whether to may replace from in part: an eligible broker
// not in part, on from's rack or on a rack with room.
func (p *planner) canTake(part *partitionPlan, from, to int32) bool {
	if !p.isEligible(to) || slices.Contains(part.replicas, to) {
		return false
	}
	rack := p.rackOf[to]
	return rack == p.rackOf[from] || p.onRack(part, rack, from) < p.maxPerRack(part)
}

// replace puts to where from is in part, keeping its position (a moved
// preferred leader is replaced as preferred leader).
func (p *planner) replace(part *partitionPlan, from, to int32) {
	i := slices.Index(part.replicas, from)
	part.replicas[i] = to
	p.replicas[to]++
	if i == 0 {
		p.leaders[to]++
	}
	if p.isEligible(from) {
		p.replicas[from]--
		if i == 0 {
			p.leaders[from]--
		}
	}
}

// byLoad returns the eligible brokers sorted by count ascending (desc:
// descending), then by id.
func (p *planner) byLoad(count map[int32]int, desc bool) []int32 {
	ids := slices.Clone(p.eligible)
	slices.SortStableFunc(ids, func(a, b int32) int {
		if desc {
			return cmp.Compare(count[b], count[a])
		}
		return cmp.Compare(count[a], count[b])
	})
	return ids
}

// evacuate moves node's replica of part to the least loaded eligible
// broker, preferring one that keeps the rack spread.
func (p *planner) evacuate(part *partitionPlan, node int32) error {
	var fallback int32 = -1
	for _, to := range p.byLoad(p.replicas, false) {
		if p.canTake(part, node, to) {
			p.replace(part, node, to)
			return nil
		}
		if fallback < 0 && !slices.Contains(part.replicas, to) {
			fallback = to
		}
	}
	if fallback < 0 {
		return fmt.Errorf("%w: %s/%d has %d replicas %v and no other broker can take broker %d's (%d other brokers)",
			ErrCannotDrain, part.given.Topic, part.given.Partition, len(part.replicas), part.replicas, node, len(p.eligible))
	}
	// Too few racks with room: a distinct broker still keeps RF copies.
	p.replace(part, node, fallback)
	return nil
}

// spreadRacks moves replicas off racks that hold more of a partition than
// maxPerRack, each to the least loaded broker of a rack with room.
func (p *planner) spreadRacks() {
	for _, part := range p.partitions {
		for range part.replicas { // each pass fixes one replica at most
			from, ok := p.crowdingReplica(part)
			if !ok {
				break
			}
			moved := false
			for _, to := range p.byLoad(p.replicas, false) {
				if p.rackOf[to] != p.rackOf[from] && p.canTake(part, from, to) {
					p.replace(part, from, to)
					moved = true
					break
				}
			}
			if !moved {
				break
			}
		}
	}
}

// crowdingReplica picks a replica of part on a rack over its share: one
// that is not the preferred leader if possible, then the one on the most
// loaded broker, then the later one in the list.
func (p *planner) crowdingReplica(part *partitionPlan) (int32, bool) {
	limit := p.maxPerRack(part)
	best, bestAt := int32(-1), -1
	better := func(i int) bool {
		if (bestAt == 0) != (i == 0) {
			return bestAt == 0
		}
		return p.replicas[part.replicas[i]] >= p.replicas[best]
	}
	for i, id := range part.replicas {
		if !p.isEligible(id) || p.onRack(part, p.rackOf[id], -1) <= limit {
			continue
		}
		if bestAt < 0 || better(i) {
			best, bestAt = id, i
		}
	}
	return best, bestAt >= 0
}

// balanceReplicas moves replicas from the most to the least loaded brokers
// until every count is within the band, or no move is allowed.
func (p *planner) balanceReplicas() {
	lo, hi := band(p.totalReplicas(), len(p.eligible))
	for p.moveOneReplica(lo, hi) {
	}
}

// moveOneReplica makes the first move that shrinks the excess: from a
// broker above lo to one below hi, one of them outside [lo, hi]. Every move
// lowers the sum of squared counts, so the loop ends.
func (p *planner) moveOneReplica(lo, hi int) bool {
	for _, from := range p.byLoad(p.replicas, true) {
		for _, to := range p.byLoad(p.replicas, false) {
			nf, nt := p.replicas[from], p.replicas[to]
			if nf <= lo || nt >= hi || (nf <= hi && nt >= lo) {
				continue
			}
			if part := p.partitionToMove(from, to); part != nil {
				p.replace(part, from, to)
				return true
			}
		}
	}
	return false
}

// partitionToMove picks a partition whose replica on from may go to to.
// It moves from's preferred leadership along only when that evens out
// leaderships (leadersUneven), else prefers a partition from does not lead
// so that leaders stay where they are; then one already changed by the
// plan, so that fewer partitions move.
func (p *planner) partitionToMove(from, to int32) *partitionPlan {
	moveLeader := p.leadersUneven(from, to)
	var best *partitionPlan
	bestScore := -1
	for _, part := range p.partitions {
		if !slices.Contains(part.replicas, from) || !p.canTake(part, from, to) {
			continue
		}
		score := 0
		if (part.replicas[0] == from) == moveLeader {
			score += 2
		}
		if part.changed() {
			score++
		}
		if score > bestScore {
			best, bestScore = part, score
		}
	}
	return best
}

// leadersUneven reports whether handing one preferred leadership from
// from to to shrinks the leadership excess, by the rule of reorderOne.
func (p *planner) leadersUneven(from, to int32) bool {
	lo, hi := band(p.totalLeaders(), len(p.eligible))
	nf, nt := p.leaders[from], p.leaders[to]
	return nf > lo && nt < hi && (nf > hi || nt < lo)
}

func (p *planner) totalReplicas() int {
	total := 0
	for _, id := range p.eligible {
		total += p.replicas[id]
	}
	return total
}

func (p *planner) totalLeaders() int {
	total := 0
	for _, id := range p.eligible {
		total += p.leaders[id]
	}
	return total
}

func (part *partitionPlan) changed() bool { return !slices.Equal(part.replicas, part.given.Replicas) }

// balanceLeaders reorders partitions (only those in among, when not nil)
// so that every broker's preferred leaderships are within the band.
func (p *planner) balanceLeaders(among map[*partitionPlan]bool) {
	lo, hi := band(p.totalLeaders(), len(p.eligible))
	for {
		for p.reorderOne(lo, hi, among) {
		}
		if among != nil || !p.moveOneLeadership(lo, hi) {
			return
		}
	}
}

// moveOneLeadership is for leaderships that no reordering can hand over
// (single-replica partitions, say): it moves a replica that leads, from a
// broker with too many leaderships to one with too few, and when that
// would take a replica count out of its band, moves a replica that does
// not lead back the other way, so both replica counts stay as they were.
func (p *planner) moveOneLeadership(lo, hi int) bool {
	replicasLo, replicasHi := band(p.totalReplicas(), len(p.eligible))
	for _, from := range p.byLoad(p.leaders, true) {
		for _, to := range p.byLoad(p.leaders, false) {
			if !p.leadersUneven(from, to) {
				continue
			}
			led := p.find(func(part *partitionPlan) bool { return part.replicas[0] == from && p.canTake(part, from, to) })
			if led == nil {
				continue
			}
			if p.replicas[from] > replicasLo && p.replicas[to] < replicasHi {
				p.replace(led, from, to)
				return true
			}
			back := p.find(func(part *partitionPlan) bool {
				return part != led && part.replicas[0] != to && slices.Contains(part.replicas, to) && p.canTake(part, to, from)
			})
			if back != nil {
				p.replace(led, from, to)
				p.replace(back, to, from)
				return true
			}
		}
	}
	return false
}

// find is the first partition, in order, that ok accepts, preferring one
// already changed by the plan.
func (p *planner) find(ok func(*partitionPlan) bool) *partitionPlan {
	var first *partitionPlan
	for _, part := range p.partitions {
		if len(part.replicas) == 0 || !ok(part) {
			continue
		}
		if part.changed() {
			return part
		}
		if first == nil {
			first = part
		}
	}
	return first
}

// reorderOne hands one preferred leadership from a broker above lo to a
// broker below hi, one of them outside [lo, hi]. A direct swap needs a
// partition holding both; failing that, a chain of swaps does it (1 hands
// a partition to 2, 2 one to 3, ...), which leaves every broker between
// with the count it had. Every step lowers the sum of squared counts, so
// the loop ends.
func (p *planner) reorderOne(lo, hi int, among map[*partitionPlan]bool) bool {
	handOver := p.leadershipEdges(among)
	for _, from := range p.byLoad(p.leaders, true) {
		if p.leaders[from] <= lo {
			break
		}
		parent := p.reachable(from, handOver)
		for _, to := range p.byLoad(p.leaders, false) {
			nf, nt := p.leaders[from], p.leaders[to]
			if _, ok := parent[to]; !ok || to == from || nt >= hi || (nf <= hi && nt >= lo) {
				continue
			}
			for at := to; at != from; at = parent[at] {
				p.promote(handOver[parent[at]][at], at)
			}
			return true
		}
	}
	return false
}

// leadershipEdges maps x → y → the partition x would hand to y: one led
// by x that holds y, preferring one already changed by the plan (no extra
// move), then one that y leads now (its election changes nothing).
func (p *planner) leadershipEdges(among map[*partitionPlan]bool) map[int32]map[int32]*partitionPlan {
	edges := map[int32]map[int32]*partitionPlan{}
	score := func(part *partitionPlan, to int32) int {
		return 2*boolInt(part.changed()) + boolInt(part.given.Leader == to)
	}
	for _, part := range p.partitions {
		if (among != nil && !among[part]) || len(part.replicas) == 0 || !p.isEligible(part.replicas[0]) {
			continue
		}
		from := part.replicas[0]
		for _, to := range part.replicas[1:] {
			if !p.isEligible(to) {
				continue
			}
			if edges[from] == nil {
				edges[from] = map[int32]*partitionPlan{}
			}
			if old := edges[from][to]; old == nil || score(part, to) > score(old, to) {
				edges[from][to] = part
			}
		}
	}
	return edges
}

// reachable is a breadth-first search from start over edges: each broker
// reached, with the broker it is reached from (start maps to itself).
func (p *planner) reachable(start int32, edges map[int32]map[int32]*partitionPlan) map[int32]int32 {
	parent := map[int32]int32{start: start}
	queue := []int32{start}
	for len(queue) > 0 {
		at := queue[0]
		queue = queue[1:]
		for _, next := range p.eligible { // sorted: the search is deterministic
			if _, seen := parent[next]; !seen && edges[at][next] != nil {
				parent[next] = at
				queue = append(queue, next)
			}
		}
	}
	return parent
}

// promote makes to the preferred leader of part by swapping it with the
// first replica.
func (p *planner) promote(part *partitionPlan, to int32) {
	i := slices.Index(part.replicas, to)
	from := part.replicas[0]
	part.replicas[0], part.replicas[i] = to, from
	p.leaders[from]--
	p.leaders[to]++
}

// moves lists the partitions whose plan differs from what was given.
func (p *planner) moves() []Move {
	var out []Move
	for _, part := range p.partitions {
		if part.changed() {
			out = append(out, Move{Topic: part.given.Topic, Partition: part.given.Partition,
				From: slices.Clone(part.given.Replicas), To: slices.Clone(part.replicas)})
		}
	}
	return out
}

// promoteLeastLeading puts first the replica of part with the fewest
// other preferred leaderships; on a tie the current leader, then a replica
// that was in the partition before (in sync, unlike the one just put
// first in the drained node's place), the earliest in the list.
// REQUIRES: part.replicas[0] is the replica that replaced the drained node.
func (p *planner) promoteLeastLeading(part *partitionPlan) {
	key := func(i int) []int {
		id := part.replicas[i]
		others := p.leaders[id]
		if i == 0 {
			others--
		}
		return []int{others, boolInt(id != part.given.Leader), boolInt(i == 0), i}
	}
	best := 0
	for i, id := range part.replicas {
		if p.isEligible(id) && slices.Compare(key(i), key(best)) < 0 {
			best = i
		}
	}
	if best != 0 {
		p.promote(part, part.replicas[best])
	}
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}
