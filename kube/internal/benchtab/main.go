// Command benchtab turns the output of the cluster benchmarks (go test
// -bench, several runs each) into BENCHMARKS.md's tables: one a
// benchmark, a row a figure, with the median, min and max of the runs
// beside the figure's target. It reads the output on stdin and merges it
// into the file named by its argument, between its markers: the tables of
// the benchmarks it is given replace those of the same name, or follow the
// others when new; the tables of the benchmarks it is not given stay as
// they are. So a run of some of the benchmarks (make bench BENCH_RUN=...)
// keeps the figures of the rest. Each table's heading has the date of its
// run, and the line above the tables says the machine of the last.
package main

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"
)

// progressLine is a benchmark's progress line, as progress writes it.
var progressLine = regexp.MustCompile(`\d\d:\d\d:\d\d BenchmarkCluster\S*: .*$`)

const (
	begin = "<!-- make bench: scenarios -->"
	end   = "<!-- make bench: end -->"
)

// targets are the targets, by benchmark and unit.
var targets = map[string]string{
	"ColdStart/N=1000 of-ceiling":          "≥ 0.95",
	"ColdStart/N=10000 of-ceiling":         "≥ 0.95",
	"ColdStart/N=100000 of-ceiling":        "≥ 0.95",
	"ColdStart/N=1000 writes/object":       "3",
	"ColdStart/N=10000 writes/object":      "3",
	"ColdStart/N=1000 reconciles/object":   "≤ 1.2",
	"ColdStart/N=10000 reconciles/object":  "≤ 1.2",
	"ColdStart/N=10000 heap-B/object":      "< 3072",
	"ColdStart/N=100000 heap-B/object":     "< 3072",
	"ColdStart/N=10000 cpu-ms/object":      "< 10",
	"ColdStart/N=100000 cpu-ms/object":     "≤ N=10000's",
	"ColdStart/N=10000 relist-reconciles":  "0",
	"ColdStart/N=100000 relist-reconciles": "0",
	"ColdStart/N=1000 restart-writes":      "0",
	"ColdStart/N=10000 restart-writes":     "0",
	"Churn latency-p99-s":                  "< 1",
	// A live change during a cold start.
	"LiveChanges/N=10000 change-latency-p50-s": "< 1",
	"LiveChanges/N=10000 change-latency-p99-s": "< 1",
	"LiveChanges/N=10000 settle-vs-quiet":      "≤ 1.02",
	"ColdChurn/N=10000 latency-p99-s":          "< 1",
	// Scaling out: per replica, a replica's share of replicas=1's.
	"Shards/replicas=2 settle-s":             "≤ replicas=1's",
	"Shards/replicas=4 settle-s":             "≤ replicas=1's",
	"Shards/replicas=2 heap-B/replica":       "replicas=1's / 2, ± 20%",
	"Shards/replicas=4 heap-B/replica":       "replicas=1's / 4, ± 20%",
	"Shards/replicas=2 received-MiB/replica": "replicas=1's / 2, ± 20%",
	"Shards/replicas=4 received-MiB/replica": "replicas=1's / 4, ± 20%",
	// The cache an App's controllers share.
	"Related/N=10000/workers=4 change-latency-p99-s":  "< 1",
	"Related/N=10000/workers=16 change-latency-p99-s": "< 1",
	"SharedOwns/N=10000 both-vs-one":                  "≤ 1.1",
	"SharedOwns/N=10000 both-deployment-watches":      "1",
	"Selector/N=10000 selected-cached-objects":        "10",
	// Reconciled at a version it isn't stored at: issue 37 sets none of
	// its own, and the App does the plain cold start's work, so it has
	// the plain cold start's counts (issue 25's).
	"ConvertedColdStart/N=1000 reconciles/object":  "≤ 1.2",
	"ConvertedColdStart/N=10000 reconciles/object": "≤ 1.2",
	"ConvertedColdStart/N=1000 writes/object":      "3",
	"ConvertedColdStart/N=10000 writes/object":     "3",
}

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: benchtab BENCHMARKS.md < go-test-bench-output")
		os.Exit(2)
	}
	if err := run(os.Stdin, os.Args[1]); err != nil {
		fmt.Fprintln(os.Stderr, "benchtab:", err)
		os.Exit(1)
	}
}

func run(in io.Reader, path string) error {
	results, order, err := parse(in)
	if err != nil {
		return err
	}
	if len(order) == 0 {
		return fmt.Errorf("no cluster benchmark results on stdin")
	}
	doc, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	date := time.Now().UTC().Format(time.DateOnly)
	fresh := make([]table, 0, len(order))
	for _, name := range order {
		var b strings.Builder
		writeTable(&b, name, date, results[name])
		fresh = append(fresh, table{name: name, text: b.String()})
	}
	out, err := merge(doc, machine(), fresh)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return os.WriteFile(path, out, 0o644)
}

// machine is the line above the tables: the machine the benchmarks ran on.
func machine() string {
	return fmt.Sprintf("Runs on %d cores, %s of memory, %s %s/%s, the control plane of Kubernetes v1.37.2 built by the tests' harness; each table's heading has the date of its run.",
		runtime.NumCPU(), memory(), runtime.Version(), runtime.GOOS, runtime.GOARCH)
}

// A table is one benchmark's table between the markers: its name, and its
// text from its heading's line to its last line that isn't blank, with
// the line's newline.
type table struct {
	name string
	text string
}

// merge returns doc with the tables in fresh merged into those between
// its markers. A fresh table replaces the table of its name, in its
// place, or follows the others when none has its name; the others are
// kept as they are. What is before the first table (the machine line of
// the last run) is replaced by machine.
func merge(doc []byte, machine string, fresh []table) ([]byte, error) {
	i := bytes.Index(doc, []byte(begin))
	if i < 0 {
		return nil, fmt.Errorf("no %q marker", begin)
	}
	j := bytes.Index(doc[i:], []byte(end))
	if j < 0 {
		return nil, fmt.Errorf("no %q marker after %q", end, begin)
	}
	j += i
	tables := mergeTables(splitTables(string(doc[i+len(begin):j])), fresh)
	return slices.Concat(doc[:i], []byte(block(machine, tables)), doc[j:]), nil
}

// mergeTables returns old with each of fresh in the place of the table of
// its name, and those of fresh whose names old hasn't after them. A second
// table of a fresh table's name is dropped: it is as old as the first.
func mergeTables(old, fresh []table) []table {
	byName := map[string]table{}
	for _, t := range fresh {
		byName[t.name] = t
	}
	placed := map[string]bool{}
	var tables []table
	for _, t := range old {
		if f, ok := byName[t.name]; ok {
			if !placed[t.name] {
				tables = append(tables, f)
				placed[t.name] = true
			}
			continue
		}
		tables = append(tables, t)
	}
	for _, t := range fresh {
		if !placed[t.name] {
			tables = append(tables, t)
			placed[t.name] = true
		}
	}
	return tables
}

// splitTables parses what is between the markers into its tables, in
// order. A table begins at a "### " heading and runs to the next; what is
// before the first heading is dropped.
func splitTables(between string) []table {
	var tables []table
	for line := range strings.SplitAfterSeq(between, "\n") {
		if strings.HasPrefix(line, "### ") {
			tables = append(tables, table{name: tableName(line)})
		}
		if len(tables) > 0 {
			tables[len(tables)-1].text += line
		}
	}
	for k := range tables {
		tables[k].text = strings.TrimRightFunc(tables[k].text, unicode.IsSpace) + "\n"
	}
	return tables
}

// tableName is the name in a table's heading, such as
// "### ColdStart/N=1000 (3 runs, 2026-12-03)" or, from before the headings
// had dates, "### ColdStart/N=1000 (3 runs)": the text before " (".
func tableName(heading string) string {
	name, _, _ := strings.Cut(strings.TrimSpace(strings.TrimPrefix(heading, "### ")), " (")
	return name
}

// block is what goes between the markers, the begin marker first: the
// machine line, then the tables, a blank line around each.
func block(machine string, tables []table) string {
	var b strings.Builder
	b.WriteString(begin + "\n\n" + machine + "\n")
	for _, t := range tables {
		b.WriteString("\n" + t.text)
	}
	b.WriteString("\n")
	return b.String()
}

// parse reads benchmark lines such as
//
//	BenchmarkClusterColdStart/N=1000-2  1  123 ns/op  14.2 settle-s  1.1 reconciles/object
//
// into each benchmark's runs of each unit, in the order first seen.
func parse(in io.Reader) (map[string]map[string][]float64, []string, error) {
	results := map[string]map[string][]float64{}
	var order []string
	units := map[string][]string{}
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	pending := "" // a benchmark's name, its figures on a later line
	for sc.Scan() {
		line := sc.Text()
		// The benchmarks' progress goes to stderr, and when it shares
		// stdout's file, it lands between a benchmark's name and its
		// figures.
		if m := progressLine.FindStringIndex(line); m != nil {
			line = line[:m[0]]
		}
		if strings.HasPrefix(line, "BenchmarkCluster") && len(strings.Fields(line)) == 1 {
			pending = line
			continue
		}
		if pending != "" && (strings.HasPrefix(line, " ") || strings.HasPrefix(line, "\t")) {
			line = pending + line
		}
		if strings.TrimSpace(line) != "" {
			pending = ""
		}
		fields := strings.Fields(line)
		if len(fields) < 4 || !strings.HasPrefix(fields[0], "BenchmarkCluster") {
			continue
		}
		name := strings.TrimPrefix(fields[0], "BenchmarkCluster")
		if k := strings.LastIndex(name, "-"); k > 0 {
			if _, err := strconv.Atoi(name[k+1:]); err == nil {
				name = name[:k] // the GOMAXPROCS suffix
			}
		}
		if results[name] == nil {
			results[name] = map[string][]float64{}
			order = append(order, name)
		}
		for k := 2; k+1 < len(fields); k += 2 {
			v, err := strconv.ParseFloat(fields[k], 64)
			if err != nil {
				return nil, nil, fmt.Errorf("%q: %w", line, err)
			}
			unit := fields[k+1]
			if unit == "ns/op" {
				continue
			}
			if _, seen := results[name][unit]; !seen {
				units[name] = append(units[name], unit)
			}
			results[name][unit] = append(results[name][unit], v)
		}
	}
	return results, order, sc.Err()
}

// writeTable writes a benchmark's table, its heading first, with the
// number of runs and their date.
func writeTable(b *strings.Builder, name, date string, runs map[string][]float64) {
	units := make([]string, 0, len(runs))
	for u := range runs {
		units = append(units, u)
	}
	slices.SortFunc(units, func(x, y string) int { return strings.Compare(order(x), order(y)) })
	n := 0
	for _, vs := range runs {
		n = max(n, len(vs))
	}
	runsOf := "runs"
	if n == 1 {
		runsOf = "run"
	}
	fmt.Fprintf(b, "### %s (%d %s, %s)\n\n", name, n, runsOf, date)
	b.WriteString("| figure | median | min | max | target |\n| --- | ---: | ---: | ---: | --- |\n")
	for _, u := range units {
		vs := slices.Sorted(slices.Values(runs[u]))
		target := targets[name+" "+u]
		if target == "" {
			target = "—"
		}
		fmt.Fprintf(b, "| %s | %s | %s | %s | %s |\n", u, format(vs[len(vs)/2]), format(vs[0]), format(vs[len(vs)-1]), target)
	}
}

// baselines are the prefixes of the figures a scenario measures on a
// baseline phase of its own, ConvertedColdStart's plain cold starts: the
// plain one the converted one is compared with, then the one on the fresh
// kube-apiserver. Longest first.
var baselines = []string{"plain-fresh-", "plain-"}

// order orders the figures by rank, each baseline's figure right after
// the figure it is the baseline of: settle-s, plain-settle-s,
// plain-fresh-settle-s.
func order(unit string) string {
	for k, prefix := range baselines {
		if base, ok := strings.CutPrefix(unit, prefix); ok {
			return rank(base) + "\x00" + strconv.Itoa(len(baselines)-k)
		}
	}
	return rank(unit) + "\x00" + "0"
}

// rank orders the figures: times first, then rates, then per-object
// counts, then the rest.
func rank(unit string) string {
	switch {
	case strings.HasSuffix(unit, "-s"):
		return "0" + unit
	case strings.HasSuffix(unit, "/s") || unit == "of-ceiling":
		return "1" + unit
	case strings.Contains(unit, ":"):
		return "3" + unit
	case strings.HasSuffix(unit, "/object"):
		return "2" + unit
	}
	return "4" + unit
}

func format(v float64) string {
	switch {
	case v == 0:
		return "0"
	case v >= 100:
		return strconv.FormatFloat(v, 'f', 0, 64)
	case v >= 10:
		return strconv.FormatFloat(v, 'f', 1, 64)
	}
	return strconv.FormatFloat(v, 'f', 3, 64)
}

// memory is the machine's memory, from /proc/meminfo.
func memory() string {
	data, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return "unknown"
	}
	for line := range strings.SplitSeq(string(data), "\n") {
		if rest, ok := strings.CutPrefix(line, "MemTotal:"); ok {
			kb, err := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 64)
			if err == nil {
				return fmt.Sprintf("%.0f GiB", kb/(1<<20))
			}
		}
	}
	return "unknown"
}
