package cache

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"reflect"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/framer"
)

// frames reads every frame of stream through lineFrames, each Read given
// a buffer of size bytes: the frames, and the error that ended them.
func frames(stream string, size int) ([]string, error) {
	r := jsonLines{}.NewFrameReader(io.NopCloser(strings.NewReader(stream)))
	var out []string
	var frame []byte
	for {
		p := make([]byte, size)
		n, err := r.Read(p)
		frame = append(frame, p[:n]...)
		switch {
		case errors.Is(err, io.ErrShortBuffer):
			continue
		case err != nil:
			return out, err
		}
		out = append(out, string(frame))
		frame = nil
	}
}

// A watch's stream is framed an object at a time: one a line as the API
// server writes it, and over several lines, two on one, or the last
// without its newline all the same; a Read's buffer too short for the
// object gets it in parts; a stream that ends inside an object is
// io.ErrUnexpectedEOF, and one that holds something else an error.
func TestLineFramesFrameEachObject(t *testing.T) {
	const stream = `{"type":"ADDED","object":{"a":"}\n{"}}` + "\n" +
		"\n  \n" +
		`{"type":"MODIFIED",` + "\n" + `  "object":{"b":[1,2]}}` + "\n" +
		`{"type":"DELETED","object":{}} {"type":"BOOKMARK","object":{}}` + "\n" +
		`{"type":"ERROR","object":{}}`
	want := []string{
		`{"type":"ADDED","object":{"a":"}\n{"}}`,
		`{"type":"MODIFIED",` + "\n" + `  "object":{"b":[1,2]}}`,
		`{"type":"DELETED","object":{}}`,
		`{"type":"BOOKMARK","object":{}}`,
		`{"type":"ERROR","object":{}}`,
	}
	for _, size := range []int{1024, 7} {
		got, err := frames(stream, size)
		if !errors.Is(err, io.EOF) || !reflect.DeepEqual(got, want) {
			t.Errorf("with %d-byte reads: frames %q, %v; want %q and io.EOF", size, got, err, want)
		}
	}
	// An object longer than the reader's buffer, its string full of
	// escaped quotes and backslashes, on one line and over many.
	long := `{"type":"ADDED","object":{"s":"` + strings.Repeat(`a\"}]b\\`, 20000) + `"}}`
	pretty := "{\n" + strings.Repeat(`"k": "v}",`+"\n", 5000) + `"end": ["]"]` + "\n}"
	if got, err := frames(long+"\n"+pretty+"\n"+long, 4096); !errors.Is(err, io.EOF) || !reflect.DeepEqual(got, []string{long, pretty, long}) {
		t.Errorf("long objects: %d frames, %v; want 3 and io.EOF", len(got), err)
	}
	if got, err := frames(`{"type":"ADDED"}`+"\n"+`{"type":"MOD`, 1024); len(got) != 1 || !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("a stream cut in an object: frames %q, %v; want 1 and io.ErrUnexpectedEOF", got, err)
	}
	if _, err := frames(`["type"]`, 1024); err == nil || !strings.Contains(err.Error(), "where an object starts") {
		t.Errorf("a stream of an array: %v, want an error that it holds no object", err)
	}
}

// FuzzLineFrames: of a stream of JSON objects, lineFrames frames what
// client-go's JSON framer does, and of any stream, it never panics.
func FuzzLineFrames(f *testing.F) {
	f.Add([]byte(`{"type":"ADDED","object":{}}` + "\n" + `{"a":"\\\""}{"b":{"c":[]}}`))
	f.Add([]byte(" {\n\"a\"\n:\n1}\n\n{}"))
	f.Fuzz(func(t *testing.T, data []byte) {
		got, err := frames(string(data), 16)
		want := []string{}
		r := framer.NewJSONFramedReader(io.NopCloser(bytes.NewReader(data)))
		for {
			var m json.RawMessage
			buf := make([]byte, len(data)+1)
			n, rerr := r.Read(buf)
			if rerr != nil {
				if !errors.Is(rerr, io.EOF) {
					return // not a stream of JSON values
				}
				break
			}
			if m = buf[:n]; len(m) == 0 || m[0] != '{' {
				return // a value that isn't an object
			}
			want = append(want, string(m))
		}
		if !errors.Is(err, io.EOF) || !reflect.DeepEqual(append([]string{}, got...), want) {
			t.Errorf("frames of %q: %q, %v; want %q", data, got, err, want)
		}
	})
}

// FuzzTopLevel: topLevel never panics, and of a valid JSON object it
// yields each member, whose keys and values are the object's.
func FuzzTopLevel(f *testing.F) {
	f.Add([]byte(testMemcachedJSON))
	f.Add([]byte(` { "a" : 1 , "b\u0022" : [ "}" , {"c":"]"} ] , "d":null,"e":true,"f":-1.5e3 } `))
	f.Add([]byte(`{"a":"\\","b":"\"}"}`))
	f.Add([]byte(`{}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		var members [][]byte
		got := map[string]json.RawMessage{}
		err := topLevel(data, func(key, member, value []byte) error {
			members = append(members, member)
			got[string(key)] = value
			return nil
		})
		_, _, _ = (cachedCodec{}).Decode(data, nil, nil)
		var want map[string]json.RawMessage
		if json.Unmarshal(data, &want) != nil || want == nil {
			return
		}
		if err != nil {
			t.Fatalf("topLevel(%s): %v", data, err)
		}
		for k, v := range want {
			var a, b bytes.Buffer
			if json.Compact(&a, v) != nil || json.Compact(&b, got[k]) != nil || a.String() != b.String() {
				t.Errorf("member %q = %s, want %s", k, got[k], v)
			}
		}
		if len(got) != len(want) {
			t.Errorf("%d members, want %d", len(got), len(want))
		}
		var whole, again any
		rebuilt := append(append([]byte("{"), bytes.Join(members, []byte(","))...), '}')
		if json.Unmarshal(data, &whole) != nil || json.Unmarshal(rebuilt, &again) != nil || !reflect.DeepEqual(whole, again) {
			t.Errorf("the members rejoined %s, want %s", rebuilt, data)
		}
	})
}
