package main

import (
	"reflect"
	"strings"
	"testing"
)

const testMachine = "Runs on 2 cores, 24 GiB of memory, go1.26.8 linux/amd64, the control plane of Kubernetes v1.37.2 built by the tests' harness; each table's heading has the date of its run."

// The tables of a BENCHMARKS.md, as a run of 2026-12-03 wrote them.
const (
	coldStart = "### ColdStart/N=1000 (3 runs, 2026-12-03)\n\n" +
		"| figure | median | min | max | target |\n| --- | ---: | ---: | ---: | --- |\n" +
		"| settle-s | 14.2 | 13.9 | 15.0 | — |\n"
	workers = "### Workers/workers=4 (3 runs, 2026-12-03)\n\n" +
		"| figure | median | min | max | target |\n| --- | ---: | ---: | ---: | --- |\n" +
		"| settle-s | 12.0 | 11.5 | 12.1 | — |\n"
	churn = "### Churn (3 runs, 2026-12-03)\n\n" +
		"| figure | median | min | max | target |\n| --- | ---: | ---: | ---: | --- |\n" +
		"| latency-p99-s | 0.240 | 0.080 | 0.240 | < 1 |\n"
	// A heading from before the headings had dates.
	oldChurn = "### Churn (3 runs)\n\n" +
		"| figure | median | min | max | target |\n| --- | ---: | ---: | ---: | --- |\n" +
		"| latency-p99-s | 0.300 | 0.100 | 0.300 | < 1 |\n"
)

// doc is a BENCHMARKS.md with prose around the markers and between them
// the lines given.
func doc(between ...string) string {
	return "# Benchmarks\n\nProse.\n\n" + begin + "\n\n" + strings.Join(between, "\n") + "\n" + end + "\n\nMore prose.\n"
}

// freshTable is a table writeTable writes, dated 2026-12-05.
func freshTable(t *testing.T, name string, runs map[string][]float64) table {
	t.Helper()
	var b strings.Builder
	writeTable(&b, name, "2026-12-05", runs)
	return table{name: name, text: b.String()}
}

func TestMerge(t *testing.T) {
	workersNew := freshTable(t, "Workers/workers=4", map[string][]float64{"settle-s": {9.5, 9.1, 10.2}})
	shards := freshTable(t, "Shards/replicas=2", map[string][]float64{"settle-s": {82.1}})

	tests := []struct {
		name  string
		doc   string
		fresh []table
		want  string
	}{
		{
			name:  "replaces one table of three in its place",
			doc:   doc(testMachine, "", coldStart, workers, churn),
			fresh: []table{workersNew},
			want:  doc(testMachine, "", coldStart, workersNew.text, churn),
		},
		{
			name:  "appends a new name after the others",
			doc:   doc(testMachine, "", coldStart, workers, churn),
			fresh: []table{shards},
			want:  doc(testMachine, "", coldStart, workers, churn, shards.text),
		},
		{
			name:  "replaces one and appends another",
			doc:   doc(testMachine, "", coldStart, workers, churn),
			fresh: []table{shards, workersNew},
			want:  doc(testMachine, "", coldStart, workersNew.text, churn, shards.text),
		},
		{
			name:  "keeps a heading without a date",
			doc:   doc(testMachine, "", coldStart, oldChurn),
			fresh: []table{workersNew},
			want:  doc(testMachine, "", coldStart, oldChurn, workersNew.text),
		},
		{
			name:  "replaces a table whose heading has no date",
			doc:   doc(testMachine, "", oldChurn, coldStart),
			fresh: []table{freshTable(t, "Churn", map[string][]float64{"latency-p99-s": {0.2}})},
			want: doc(testMachine, "", "### Churn (1 run, 2026-12-05)\n\n"+
				"| figure | median | min | max | target |\n| --- | ---: | ---: | ---: | --- |\n"+
				"| latency-p99-s | 0.200 | 0.200 | 0.200 | < 1 |\n", coldStart),
		},
		{
			name: "replaces the old machine line",
			doc: doc("Run 2026-12-03 on 2 cores, 24 GiB of memory, go1.26.8 linux/amd64, the control plane of Kubernetes v1.37.2 built by the tests' harness.",
				"", "A stray line.", "", coldStart, churn),
			fresh: []table{workersNew},
			want:  doc(testMachine, "", coldStart, churn, workersNew.text),
		},
		{
			name:  "fills an empty block",
			doc:   doc(),
			fresh: []table{shards},
			want:  doc(testMachine, "", shards.text),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { checkMerge(t, tt.doc, tt.fresh, tt.want) })
	}
}

// checkMerge checks that merging fresh into md, a BENCHMARKS.md, gives
// want, and that merged again, the same tables change nothing.
func checkMerge(t *testing.T, md string, fresh []table, want string) {
	t.Helper()
	got, err := merge([]byte(md), testMachine, fresh)
	if err != nil {
		t.Fatalf("merge: %v", err)
	}
	if string(got) != want {
		t.Errorf("merge:\n%s\nwant:\n%s", got, want)
	}
	again, err := merge(got, testMachine, fresh)
	if err != nil {
		t.Fatalf("merge again: %v", err)
	}
	if string(again) != string(got) {
		t.Errorf("merge again:\n%s\nwant:\n%s", again, got)
	}
}

func TestMergeMarkers(t *testing.T) {
	tests := []struct {
		name string
		doc  string
	}{
		{name: "no markers", doc: "# Benchmarks\n\n" + coldStart},
		{name: "no begin", doc: "# Benchmarks\n\n" + coldStart + end + "\n"},
		{name: "no end", doc: "# Benchmarks\n\n" + begin + "\n\n" + coldStart},
		{name: "end before begin", doc: end + "\n" + coldStart + begin + "\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got, err := merge([]byte(tt.doc), testMachine, nil); err == nil {
				t.Errorf("merge: no error, and:\n%s", got)
			}
		})
	}
}

func TestSplitTables(t *testing.T) {
	between := "\n\n" + testMachine + "\n\n" + coldStart + "\n" + oldChurn + "\n\n"
	got := splitTables(between)
	want := []table{{name: "ColdStart/N=1000", text: coldStart}, {name: "Churn", text: oldChurn}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("splitTables = %q, want %q", got, want)
	}
}

func TestParse(t *testing.T) {
	out := strings.Join([]string{
		"goos: linux",
		"goarch: amd64",
		"pkg: github.com/z5labs/humus/kube/example/memcached/bench",
		"cpu: Intel(R) Xeon(R) CPU",
		// The progress, on stderr, lands between the name and its figures.
		"BenchmarkClusterColdStart/N=1000-2         \t12:00:01 BenchmarkClusterColdStart/N=1000: starting the App",
		"12:00:09 BenchmarkClusterColdStart/N=1000: settled",
		"       1\t14000000000 ns/op\t        14.2 settle-s\t         1.100 reconciles/object",
		"BenchmarkClusterColdStart/N=1000-2         \t       1\t13000000000 ns/op\t        13.9 settle-s\t         1.000 reconciles/object",
		"BenchmarkClusterChurn-2                    \t       1\t60000000000 ns/op\t         0.240 latency-p99-s",
		"BenchmarkClusterColdStart/N=1000-2         \t       1\t15000000000 ns/op\t        15.0 settle-s\t         1.000 reconciles/object",
		"PASS",
		"ok  \tgithub.com/z5labs/humus/kube/example/memcached/bench\t102.0s",
	}, "\n") + "\n"
	results, order, err := parse(strings.NewReader(out))
	if err != nil {
		t.Fatalf("parse: %v", err)
	}
	if want := []string{"ColdStart/N=1000", "Churn"}; !reflect.DeepEqual(order, want) {
		t.Errorf("order = %q, want %q", order, want)
	}
	want := map[string]map[string][]float64{
		"ColdStart/N=1000": {
			"settle-s":          {14.2, 13.9, 15.0},
			"reconciles/object": {1.1, 1.0, 1.0},
		},
		"Churn": {"latency-p99-s": {0.24}},
	}
	if !reflect.DeepEqual(results, want) {
		t.Errorf("results = %v, want %v", results, want)
	}

	var b strings.Builder
	writeTable(&b, "ColdStart/N=1000", "2026-12-05", results["ColdStart/N=1000"])
	wantTable := "### ColdStart/N=1000 (3 runs, 2026-12-05)\n\n" +
		"| figure | median | min | max | target |\n| --- | ---: | ---: | ---: | --- |\n" +
		"| settle-s | 14.2 | 13.9 | 15.0 | — |\n" +
		"| reconciles/object | 1.000 | 1.000 | 1.100 | ≤ 1.2 |\n"
	if b.String() != wantTable {
		t.Errorf("writeTable:\n%s\nwant:\n%s", b.String(), wantTable)
	}
}

// TestWriteTableBaselines: a figure of a baseline phase follows the
// figure it is the baseline of, within the figures' ranks, and the
// converted cold start has the plain one's targets.
func TestWriteTableBaselines(t *testing.T) {
	runs := map[string][]float64{}
	for _, u := range []string{
		"plain-fresh-settle-s", "plain-settle-s", "settle-s", "plain-objects/s", "objects/s",
		"plain-writes/object", "writes/object", "webhook-cpu-ms/object", "plain-webhook-cpu-ms/object",
		"reconciles/object", "v1beta1:conversion-reviews/object", "plain-v1beta1:conversion-reviews/object", "settle-vs-plain",
	} {
		runs[u] = []float64{1}
	}
	var b strings.Builder
	writeTable(&b, "ConvertedColdStart/N=10000", "2026-12-06", runs)
	want := "### ConvertedColdStart/N=10000 (1 run, 2026-12-06)\n\n" +
		"| figure | median | min | max | target |\n| --- | ---: | ---: | ---: | --- |\n" +
		"| settle-s | 1.000 | 1.000 | 1.000 | — |\n" +
		"| plain-settle-s | 1.000 | 1.000 | 1.000 | — |\n" +
		"| plain-fresh-settle-s | 1.000 | 1.000 | 1.000 | — |\n" +
		"| objects/s | 1.000 | 1.000 | 1.000 | — |\n" +
		"| plain-objects/s | 1.000 | 1.000 | 1.000 | — |\n" +
		"| reconciles/object | 1.000 | 1.000 | 1.000 | ≤ 1.2 |\n" +
		"| webhook-cpu-ms/object | 1.000 | 1.000 | 1.000 | — |\n" +
		"| plain-webhook-cpu-ms/object | 1.000 | 1.000 | 1.000 | — |\n" +
		"| writes/object | 1.000 | 1.000 | 1.000 | 3 |\n" +
		"| plain-writes/object | 1.000 | 1.000 | 1.000 | — |\n" +
		"| v1beta1:conversion-reviews/object | 1.000 | 1.000 | 1.000 | — |\n" +
		"| plain-v1beta1:conversion-reviews/object | 1.000 | 1.000 | 1.000 | — |\n" +
		"| settle-vs-plain | 1.000 | 1.000 | 1.000 | — |\n"
	if b.String() != want {
		t.Errorf("writeTable:\n%s\nwant:\n%s", b.String(), want)
	}
}
