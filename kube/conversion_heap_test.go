package kube_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"runtime"
	"runtime/metrics"
	"strings"
	"testing"
	"time"

	"github.com/z5labs/humus"
	"github.com/z5labs/humus/kube"
)

// reviewOf is the body of a ConversionReview asking for the objects at
// to, each of objs written as it is, padded with objects of pad up to
// size bytes when size is over the body's length.
func reviewOf(to string, size int, pad string, objs ...string) []byte {
	var b bytes.Buffer
	b.WriteString(`{"kind":"ConversionReview","apiVersion":"apiextensions.k8s.io/v1","request":{"uid":"0a1b","desiredAPIVersion":"` + to + `","objects":[`)
	for i, o := range objs {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(o)
	}
	const end = `]}}`
	for first := len(objs) == 0; b.Len()+len(pad)+1+len(end) <= size; first = false {
		if !first {
			b.WriteByte(',')
		}
		b.WriteString(pad)
	}
	b.WriteString(end)
	return b.Bytes()
}

// serveReview is h's answer to body, and the bytes allocated while h
// answered it: an upper bound of the heap the review cost.
func serveReview(t testing.TB, h http.Handler, body []byte) (*httptest.ResponseRecorder, uint64) {
	t.Helper()
	r := httptest.NewRequest(http.MethodPost, "/convert", bytes.NewReader(body))
	r.Header.Set("Content-Type", "application/json")
	rec := httptest.NewRecorder()
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	h.ServeHTTP(rec, r)
	runtime.ReadMemStats(&after)
	return rec, after.TotalAlloc - before.TotalAlloc
}

// A ConversionReview of millions of empty objects, under
// MaxConversionReviewBytes, costs the handler a small multiple of its
// body, not a slice of every object decoded before the first is
// converted: the first object fails the review, and the rest are read
// and let go one at a time. The handler held 1.7 GB for a review of
// 32 MiB of them.
func TestConversionReviewHeapIsBoundedByItsBody(t *testing.T) {
	h, err := memcachedVersions().Handler(humus.Telemetry{})
	if err != nil {
		t.Fatal(err)
	}
	body := reviewOf("cache.example.com/v1beta1", 8<<20, `{}`)
	rec, allocated := serveReview(t, h, body)
	if rec.Code != http.StatusOK {
		t.Fatalf("answered %d: %.200s", rec.Code, rec.Body)
	}
	var resp struct {
		Response struct {
			ConvertedObjects []json.RawMessage `json:"convertedObjects"`
			Result           struct{ Status, Message string }
		}
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &resp); err != nil {
		t.Fatal(err)
	}
	if resp.Response.Result.Status != "Failure" || !strings.Contains(resp.Response.Result.Message, "(objects[0])") || len(resp.Response.ConvertedObjects) != 0 {
		t.Errorf("answered %.300s, want a Failure naming objects[0]", rec.Body)
	}
	if allocated > 2*uint64(len(body)) {
		t.Errorf("a review of %d bytes of empty objects allocated %d bytes (%.1f times the body), want at most twice the body", len(body), allocated, float64(allocated)/float64(len(body)))
	}
}

// A review that names its objects before the version asked for is
// converted as one in the API server's order is; one naming its objects,
// or the version, twice is refused.
func TestConversionReviewInAnyOrder(t *testing.T) {
	h, err := memcachedVersions().Handler(humus.Telemetry{})
	if err != nil {
		t.Fatal(err)
	}
	a := string(mustJSON(t, alpha("a", 2)))
	body := `{"request":{"objects":[` + a + `],"uid":"0a1b","desiredAPIVersion":"cache.example.com/v1beta1"},"kind":"ConversionReview","apiVersion":"apiextensions.k8s.io/v1"}`
	rec, _ := serveReview(t, h, []byte(body))
	if rec.Code != http.StatusOK || !strings.Contains(rec.Body.String(), `"uid":"0a1b","convertedObjects":[{`) ||
		!strings.Contains(rec.Body.String(), `"replicas":2`) || !strings.Contains(rec.Body.String(), `"result":{"metadata":{},"status":"Success"}`) {
		t.Errorf("a review naming its objects first answered %d: %s", rec.Code, rec.Body)
	}
	for _, twice := range []string{
		`{"request":{"uid":"1","desiredAPIVersion":"cache.example.com/v1beta1","objects":[],"objects":[]}}`,
		`{"request":{"uid":"1","objects":[],"objects":[],"desiredAPIVersion":"cache.example.com/v1beta1"}}`,
		`{"request":{"uid":"1","desiredAPIVersion":"cache.example.com/v1beta1","desiredAPIVersion":"cache.example.com/v1alpha1","objects":[]}}`,
		`{"request":{"uid":"1"},"request":{"uid":"2"}}`,
	} {
		if rec, _ := serveReview(t, h, []byte(twice)); rec.Code != http.StatusBadRequest || !strings.Contains(rec.Body.String(), "twice") {
			t.Errorf("%s answered %d: %s; want 400 saying what is named twice", twice, rec.Code, rec.Body)
		}
	}
	// Members it doesn't read, however deep, are passed over.
	body = `{"extra":{"a":[1,{"b":[[]]}],"c":"d"},"request":{"extra":[{}],"uid":"0a1b","desiredAPIVersion":"cache.example.com/v1beta1","objects":null}}`
	if rec, _ := serveReview(t, h, []byte(body)); rec.Code != http.StatusOK || !strings.Contains(rec.Body.String(), `"uid":"0a1b","result":{"metadata":{},"status":"Success"}`) {
		t.Errorf("a review with members it doesn't read answered %d: %s", rec.Code, rec.Body)
	}
}

// Conversions that would make an answer larger than twice
// MaxConversionReviewBytes fail the review, naming the bound, and let the
// objects converted so far go: however a conversion adds to an object, a
// review can't make the handler hold more than 64 MiB of answer.
func TestConversionAnswerIsBounded(t *testing.T) {
	v := memcachedVersions()
	big := strings.Repeat("m", 64<<10)
	v.Others[0] = kube.VersionOf(Memcached,
		func(in kube.Object[MemcachedSpec, MemcachedStatus]) (kube.Object[MemcachedSpecV1beta1, MemcachedStatus], error) {
			out, err := memcachedToV1beta1(in)
			out.Spec.Image = big // 64 KiB from a few bytes
			return out, err
		}, memcachedFromV1beta1)
	h, err := v.Handler(humus.Telemetry{})
	if err != nil {
		t.Fatal(err)
	}
	body := reviewOf("cache.example.com/v1beta1", 200<<10, `{"apiVersion":"cache.example.com/v1alpha1","kind":"Memcached","metadata":{"name":"m"}}`)
	rec, _ := serveReview(t, h, body)
	if rec.Code != http.StatusOK || !strings.Contains(rec.Body.String(), "the converted objects would be larger than 64 MiB, twice kube.MaxConversionReviewBytes") ||
		strings.Contains(rec.Body.String(), "convertedObjects") {
		t.Errorf("answered %d: %.300s; want a Failure naming the bound", rec.Code, rec.Body)
	}
}

// heapSampler samples the heap's objects, live and not yet swept, every
// 200µs until stopped, and keeps the most.
type heapSampler struct {
	stop chan struct{}
	done chan uint64
}

func sampleHeap() *heapSampler {
	s := &heapSampler{stop: make(chan struct{}), done: make(chan uint64)}
	go func() {
		sample := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
		var peak uint64
		tick := time.NewTicker(200 * time.Microsecond)
		defer tick.Stop()
		for {
			metrics.Read(sample)
			peak = max(peak, sample[0].Value.Uint64())
			select {
			case <-s.stop:
				s.done <- peak
				return
			case <-tick.C:
			}
		}
	}()
	return s
}

func (s *heapSampler) peak() uint64 {
	close(s.stop)
	return <-s.done
}

// BenchmarkConversionReviewHeap is the heap one ConversionReview at
// MaxConversionReviewBytes costs the handler: peak-heap-B is the most the
// heap's objects (live, and garbage not yet collected) took while it
// answered, less what they took before, after a collection, sampled every
// 200µs; peak/body is that over the review's size. Four reviews:
//
//   - empty: {} objects, 11 million of them, the most a review holds,
//     which fail at the first (no apiVersion);
//   - tiny-same: {"apiVersion":"cache.example.com/v1beta1"}, asked at
//     their own version, so each is answered as it came: an answer as
//     large as the review;
//   - tiny-converted: a Memcached of a name and nothing else, at v1alpha1,
//     asked at v1beta1: each converted, its answer larger than it;
//   - memcacheds: settled Memcacheds at v1alpha1 (BenchmarkConversionReview's,
//     2.3 kB each) asked at v1beta1: a list's worth of real objects.
func BenchmarkConversionReviewHeap(b *testing.B) {
	h, err := memcachedVersions().Handler(humus.Telemetry{})
	if err != nil {
		b.Fatal(err)
	}
	const to = "cache.example.com/v1beta1"
	for _, bc := range []struct{ name, pad, status string }{
		{"empty", `{}`, "Failure"},
		{"tiny-same", `{"apiVersion":"cache.example.com/v1beta1"}`, "Success"},
		{"tiny-converted", `{"apiVersion":"cache.example.com/v1alpha1","kind":"Memcached","metadata":{"name":"m"}}`, "Success"},
		{"memcacheds", string(settledMemcached(b, "memcached-00042")), "Success"},
	} {
		b.Run(bc.name, func(b *testing.B) {
			body := reviewOf(to, kube.MaxConversionReviewBytes, bc.pad)
			var peak, objects, answer uint64
			b.ReportAllocs()
			b.SetBytes(int64(len(body)))
			for b.Loop() {
				r := httptest.NewRequest(http.MethodPost, "/convert", bytes.NewReader(body))
				r.Header.Set("Content-Type", "application/json")
				rec := &discardWriter{header: http.Header{}}
				b.StopTimer()
				runtime.GC()
				base := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
				metrics.Read(base)
				s := sampleHeap()
				b.StartTimer()
				h.ServeHTTP(rec, r)
				b.StopTimer()
				top := s.peak()
				peak = max(peak, top-min(top, base[0].Value.Uint64()))
				if rec.code != http.StatusOK || !bytes.Contains(rec.tail, []byte(`"status":"`+bc.status+`"`)) {
					b.Fatalf("answered %d: %.300s", rec.code, rec.tail)
				}
				objects, answer = uint64(bytes.Count(body, []byte(bc.pad))), uint64(rec.n)
				b.StartTimer()
			}
			b.ReportMetric(float64(peak), "peak-heap-B")
			b.ReportMetric(float64(peak)/float64(len(body)), "peak/body")
			b.ReportMetric(float64(objects), "objects")
			b.ReportMetric(float64(answer), "answer-B")
		})
	}
}

// discardWriter is an http.ResponseWriter that keeps only the status and
// the last bytes written, as a connection's writer holds no more than
// its buffer: the answer isn't counted in the heap twice.
type discardWriter struct {
	header http.Header
	code   int
	n      int // bytes written
	tail   []byte
}

func (w *discardWriter) Header() http.Header { return w.header }

func (w *discardWriter) WriteHeader(code int) {
	if w.code == 0 {
		w.code = code
	}
}

func (w *discardWriter) Write(b []byte) (int, error) {
	w.WriteHeader(http.StatusOK)
	w.n += len(b)
	w.tail = append(w.tail, b[max(0, len(b)-512):]...)
	w.tail = w.tail[max(0, len(w.tail)-512):]
	return len(b), nil
}
