package shard

import (
	"fmt"
	"slices"
	"testing"
	"time"
)

// planned is plan's answer read as the shards this replica takes, in
// order, every free shard it may try, and the shard whose holder it asks.
func planned(self string, shards []State, now time.Time, wantedFor time.Duration) (take, tried []int, ask int) {
	more, tried, ask := Plan(self, shards, now, wantedFor)
	if more > len(tried) {
		panic(fmt.Sprintf("plan says to take %d more of %v", more, tried))
	}
	return tried[:more], tried, ask
}

// A replica holding no shard takes one, and the rest of its share at its
// next look, once it has seen the others starting with it.
func TestPlanTakesOneShardFirst(t *testing.T) {
	free := State{}
	for range 20 {
		take, tried, ask := planned("a", []State{free, free, free, free}, time.Now(), time.Minute)
		if len(take) != 1 || len(tried) != 4 || ask != -1 {
			t.Fatalf("holding none of 4 free shards, it takes %v of %v and asks %d; want one taken, 4 to try, none asked", take, tried, ask)
		}
	}
}

// fairShare is a case of TestPlanTakesAFairShare: what plan does with
// shards.
type fairShare struct {
	name   string
	shards []State
	take   []int // the shards taken, in any order
	first  int   // the shard taken first, or -1: any
	ask    int
}

// fairShares are TestPlanTakesAFairShare's cases, looked at now, with a
// free shard another replica asked for left to it for wantedFor.
func fairShares(now time.Time, wantedFor time.Duration) []fairShare {
	free := State{Free: now.Add(-time.Hour)}
	mine := State{Running: true}
	heldBy := func(holder string) State { return State{Holder: holder} }
	wanted := func(s State, by string, freedAgo time.Duration) State {
		s.WantedBy = by
		if s.Holder == "" {
			s.Free = now.Add(-freedAgo)
		}
		return s
	}
	blocked := func(s State) State { s.Blocked = true; return s }
	return []fairShare{
		{"alone, holding one, it takes every other free shard",
			[]State{mine, free, free, free}, []int{1, 2, 3}, -1, -1},
		{"with another holding 2 of 4, and one of its own, it takes the one free",
			[]State{heldBy("b"), mine, heldBy("b"), free}, []int{3}, -1, -1},
		{"holding its share of the ceiling, it takes the one free",
			[]State{mine, heldBy("b"), free}, []int{2}, -1, -1},
		{"at its ceiling, it takes no more",
			[]State{mine, mine, free, heldBy("b")}, nil, -1, -1},
		{"with every shard held by another, it asks that one for one",
			[]State{heldBy("b"), heldBy("b"), heldBy("b")}, nil, -1, 0},
		{"it asks the one holding the most",
			[]State{heldBy("a"), heldBy("a"), heldBy("b"), heldBy("b"), heldBy("b")}, nil, -1, 2},
		{"it asks for a shard no other replica has asked for",
			[]State{wanted(heldBy("b"), "c", 0), heldBy("b"), heldBy("b")}, nil, -1, 1},
		{"having asked already, it doesn't ask again",
			[]State{wanted(heldBy("b"), "self", 0), heldBy("b"), heldBy("b")}, nil, -1, -1},
		{"a free shard another replica asked for is left to it for wantedFor",
			[]State{wanted(free, "c", wantedFor-time.Nanosecond), heldBy("b")}, nil, -1, -1},
		{"after wantedFor, it takes a free shard another replica asked for",
			[]State{wanted(free, "c", wantedFor), heldBy("b")}, []int{0}, -1, -1},
		{"a free shard it asked for it takes first",
			[]State{mine, free, wanted(free, "self", time.Second), heldBy("b")}, []int{2}, 2, -1},
		{"it takes the shard it asked for before the other free ones",
			[]State{mine, free, wanted(free, "self", time.Second), free}, []int{1, 2, 3}, 2, -1},
		{"it never takes a blocked shard",
			[]State{free, blocked(free), blocked(wanted(free, "self", time.Second)), free, mine}, []int{0, 3}, -1, -1},
		{"with every shard blocked, it takes none and asks no one",
			[]State{blocked(free), blocked(free)}, nil, -1, -1},
		{"holding 1 of 4 beside replicas holding 2 and 1, it has nothing to do",
			[]State{heldBy("a"), heldBy("a"), heldBy("b"), mine}, nil, -1, -1},
		{"with 2 shards among 3 replicas, the one holding none doesn't ask",
			[]State{heldBy("a"), heldBy("b")}, nil, -1, -1},
		{"holding fewer than the floor of its share, it asks the busiest",
			[]State{mine, heldBy("a"), heldBy("a"), heldBy("a")}, nil, -1, 1},
	}
}

// plan takes free shards up to this replica's share, ceil(shards/members),
// and asks the busiest member for one only when this replica holds fewer
// than floor(shards/members) and finds none free.
func TestPlanTakesAFairShare(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	const wantedFor = 15 * time.Second
	for _, tc := range fairShares(now, wantedFor) {
		t.Run(tc.name, func(t *testing.T) {
			// plan shuffles the free shards: every order must do.
			for range 20 {
				take, tried, ask := planned("self", tc.shards, now, wantedFor)
				if !equalInts(take, tc.take) {
					t.Fatalf("plan takes %v, want %v in any order", take, tc.take)
				}
				if tc.first >= 0 && take[0] != tc.first {
					t.Fatalf("plan takes %v, want %d first", take, tc.first)
				}
				for _, i := range tried {
					if s := tc.shards[i]; s.Blocked || s.Running || s.Holder != "" {
						t.Fatalf("plan tries shard %d, %+v", i, s)
					}
				}
				if ask != tc.ask {
					t.Fatalf("plan asks for shard %d, want %d", ask, tc.ask)
				}
			}
		})
	}
}

// equalInts reports whether a and b hold the same ints, in any order.
func equalInts(a, b []int) bool {
	a, b = slices.Sorted(slices.Values(a)), slices.Sorted(slices.Values(b))
	return slices.Equal(a, b)
}
