package merge

import "reflect"

// maxCells bounds the table align fills, len(cur)×len(lossy) after their
// common start and end: 65,536 cells, 512 KiB. Beyond it, the items
// between pair by place when their numbers agree, and with nothing when
// not.
const maxCells = 1 << 16

// align pairs each of cur's items with one of lossy's, by the index of
// lossy's it pairs with, or -1 for none: items equal in both by the
// longest run of them (a diff), and between two such, as many items of
// each by place, when there are as many of each.
func align(cur, lossy []any) []int {
	pairs := make([]int, len(cur))
	for i := range pairs {
		pairs[i] = -1
	}
	// The common start and end.
	start := 0
	for start < len(cur) && start < len(lossy) && reflect.DeepEqual(cur[start], lossy[start]) {
		pairs[start] = start
		start++
	}
	ce, le := len(cur), len(lossy)
	for ce > start && le > start && reflect.DeepEqual(cur[ce-1], lossy[le-1]) {
		ce--
		le--
		pairs[ce] = le
	}
	alignMiddle(cur[start:ce], lossy[start:le], pairs[start:ce], start)
	return pairs
}

// alignMiddle pairs c's items with l's as align does, in pairs, by the
// index of l's plus off; c and l have no common start or end.
func alignMiddle(c, l []any, pairs []int, off int) {
	n, m := len(c), len(l)
	if n == 0 || m == 0 {
		return
	}
	if n*m > maxCells {
		if n == m {
			for i := range c {
				pairs[i] = off + i
			}
		}
		return
	}
	// The longest common subsequence of c and l, from the end: lcs[i][j]
	// is that of c[i:] and l[j:].
	eq := func(i, j int) bool { return reflect.DeepEqual(c[i], l[j]) }
	lcs := make([][]int32, n+1)
	for i := range lcs {
		lcs[i] = make([]int32, m+1)
	}
	for i := n - 1; i >= 0; i-- {
		for j := m - 1; j >= 0; j-- {
			switch {
			case eq(i, j):
				lcs[i][j] = lcs[i+1][j+1] + 1
			case lcs[i+1][j] >= lcs[i][j+1]:
				lcs[i][j] = lcs[i+1][j]
			default:
				lcs[i][j] = lcs[i][j+1]
			}
		}
	}
	// Walk it; pair each run between two equal items by place when it
	// holds as many of each.
	hunk := func(i0, i1, j0, j1 int) {
		if i1-i0 == j1-j0 {
			for k := range i1 - i0 {
				pairs[i0+k] = off + j0 + k
			}
		}
	}
	i, j, i0, j0 := 0, 0, 0, 0
	for i < n && j < m {
		switch {
		case eq(i, j) && lcs[i][j] == lcs[i+1][j+1]+1:
			hunk(i0, i, j0, j)
			pairs[i] = off + j
			i++
			j++
			i0, j0 = i, j
		case lcs[i+1][j] >= lcs[i][j+1]:
			i++
		default:
			j++
		}
	}
	hunk(i0, n, j0, m)
}
