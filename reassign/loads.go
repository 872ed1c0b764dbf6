package reassign

import (
	"cmp"
	"slices"
	"strconv"
)

// Load is what one broker holds: replicas, and partitions it is the
// preferred leader (first replica) of.
type Load struct {
	Broker   int32
	Rack     string
	Replicas int
	Leaders  int
}

// Loads counts every broker's replicas and preferred leaderships, sorted by
// broker id: every broker of c, and any broker that holds replicas
// without being listed (a stopped one, say), so that its replicas show.
func Loads(c Cluster) []Load {
	byID := map[int32]*Load{}
	for _, b := range c.Brokers {
		byID[b.ID] = &Load{Broker: b.ID, Rack: b.Rack}
	}
	for _, part := range c.Partitions {
		for i, id := range part.Replicas {
			l := byID[id]
			if l == nil {
				l = &Load{Broker: id}
				byID[id] = l
			}
			l.Replicas++
			if i == 0 {
				l.Leaders++
			}
		}
	}
	out := make([]Load, 0, len(byID))
	for _, l := range byID {
		out = append(out, *l)
	}
	slices.SortFunc(out, func(a, b Load) int { return cmp.Compare(a.Broker, b.Broker) })
	return out
}

// Apply returns c as it is once moves are carried out and the preferred
// leaders elected: each moved partition's Replicas is the move's To and
// its Leader To[0]. c is not changed.
func Apply(c Cluster, moves []Move) Cluster {
	type key struct {
		topic     string
		partition int32
	}
	to := map[key][]int32{}
	for _, m := range moves {
		to[key{m.Topic, m.Partition}] = m.To
	}
	out := Cluster{Brokers: slices.Clone(c.Brokers), Partitions: make([]Partition, 0, len(c.Partitions))}
	for _, part := range c.Partitions {
		part.Replicas = slices.Clone(part.Replicas)
		if replicas, ok := to[key{part.Topic, part.Partition}]; ok && len(replicas) > 0 {
			part.Replicas, part.Leader = slices.Clone(replicas), replicas[0]
		}
		out.Partitions = append(out.Partitions, part)
	}
	return out
}

// RackViolations lists the partitions of c ("topic/partition") whose
// replicas crowd a rack: more than ceil(RF / racks) on one, counting the
// racks of c's brokers and a broker without a rack as its own.
func RackViolations(c Cluster) []string {
	p := newPlanner(c, nil)
	var out []string
	for _, part := range p.partitions {
		limit := p.maxPerRack(part)
		for _, id := range part.replicas {
			if p.onRack(part, p.rackOf[id], -1) > limit {
				out = append(out, part.given.Topic+"/"+strconv.Itoa(int(part.given.Partition)))
				break
			}
		}
	}
	return out
}
