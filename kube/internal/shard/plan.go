package shard

import (
	"math/rand/v2"
	"time"
)

// State is what one look at the Leases says of one shard, for Plan.
type State struct {
	Holder   string // "" when the Lease is free by this replica's observation
	WantedBy string
	Free     time.Time // when this replica first saw the Lease free as it is
	Blocked  bool      // a held Lease of another shard count covers some of its objects
	Running  bool      // this replica has a term of the shard, running or ending
}

// Plan says how many more shards this replica (self) takes now, which
// free ones, in the order to try them (more than it takes: another
// replica can take one first), and which shard's holder it asks for one
// (-1: none), from one look at the Leases. wantedFor is how long a free
// Lease wanted by another replica is left to it.
func Plan(self string, shards []State, now time.Time, wantedFor time.Duration) (more int, take []int, ask int) {
	members, mine := membersOf(self, shards)
	n, r := len(shards), len(members)
	most, least := (n+r-1)/r, n/r

	var wanted, others []int
	for i, s := range shards {
		switch {
		case s.Running || s.Holder != "" || s.Blocked:
		case s.WantedBy == self:
			wanted = append(wanted, i)
		case s.WantedBy == "" || now.Sub(s.Free) >= wantedFor:
			others = append(others, i)
		}
	}
	rand.Shuffle(len(others), func(i, j int) { others[i], others[j] = others[j], others[i] })
	take = append(wanted, others...)
	more = min(max(most-mine, 0), len(take))
	if mine == 0 {
		// A replica holding none takes one first, and the rest of its
		// share once it sees the Leases again: replicas that start
		// together see each other by then, and share the shards without
		// handing any over.
		more = min(more, 1)
	}
	if more > 0 {
		return more, take, -1
	}
	if mine >= least {
		return 0, nil, -1
	}
	return 0, nil, askFor(self, shards, members, least)
}

// membersOf is each member's count of shards: self's (mine), each
// holder's, and none for each replica asking for one.
func membersOf(self string, shards []State) (members map[string]int, mine int) {
	members = map[string]int{}
	for _, s := range shards {
		if s.Running {
			mine++
			continue
		}
		if s.Holder != "" {
			members[s.Holder]++
		}
		if s.WantedBy != "" {
			if _, ok := members[s.WantedBy]; !ok {
				members[s.WantedBy] = 0
			}
		}
	}
	members[self] = mine
	return members, mine
}

// askFor is the shard whose holder self asks for one, holding fewer than
// least: one of the member holding the most, if it holds more than
// least, that no replica has asked for; -1 for none, or when self has
// asked already.
func askFor(self string, shards []State, members map[string]int, least int) int {
	for _, s := range shards {
		if s.WantedBy == self {
			return -1 // asked already
		}
	}
	donor, held := "", least
	for m, k := range members {
		if m == self || k <= least {
			continue
		}
		if k > held || (k == held && m < donor) {
			donor, held = m, k
		}
	}
	if donor == "" {
		return -1
	}
	for i, s := range shards {
		if s.Holder == donor && s.WantedBy == "" {
			return i
		}
	}
	return -1
}
