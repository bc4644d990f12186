package cache

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"unicode/utf8"
)

// The API server's JSON, read without decoding what isn't needed: the
// members of an object (topLevel), and the values of a watch's stream
// (jsonLines). Neither checks that a value is valid JSON; the decoding of
// each part that is read does, and a reconcile's decode of the rest.

// jsonLines frames a watch's stream of JSON objects, as the API server
// writes it: one a line. Where an object ends is found by one pass over
// its bytes that jumps from quote to quote inside its strings, kept across
// reads, so an object written over many lines, or longer than the
// reader's buffer, costs that one pass too; two on one line are framed
// apart. client-go's framer runs encoding/json's scanner over each byte
// (BenchmarkWatchEvent).
type jsonLines struct{}

func (jsonLines) NewFrameReader(r io.ReadCloser) io.ReadCloser {
	return &lineFrames{in: bufio.NewReaderSize(r, 32<<10), closer: r}
}

func (jsonLines) NewFrameWriter(w io.Writer) io.Writer { return w }

// lineFrames hands out one object of the stream a Read, in as many Reads
// as the caller's buffer takes (io.ErrShortBuffer until the last), as
// client-go's streaming decoder reads them.
type lineFrames struct {
	in     *bufio.Reader
	closer io.Closer
	buf    []byte // read from the stream: pending is its unframed rest
	// pending is what is read but not framed yet: the start of the next
	// object, or nothing.
	pending []byte
	end     objectEnd // how far into pending's object the search for its end got
	frame   []byte    // the rest of the object the last Read didn't take
	err     error     // the stream's, once read: returned once pending is framed
}

func (f *lineFrames) Read(p []byte) (int, error) {
	if len(f.frame) == 0 {
		if err := f.next(); err != nil {
			return 0, err
		}
	}
	n := copy(p, f.frame)
	if f.frame = f.frame[n:]; len(f.frame) > 0 {
		return n, io.ErrShortBuffer
	}
	return n, nil
}

func (f *lineFrames) Close() error { return f.closer.Close() }

// next frames the stream's next object, reading until what is read holds
// one whole object. io.EOF is the stream's end between two objects,
// io.ErrUnexpectedEOF in one.
func (f *lineFrames) next() error {
	f.buf = append(f.buf[:0], f.pending...) // memmove: pending is in buf
	f.pending = f.buf
	f.end = objectEnd{}
	for {
		if f.end.pos == 0 {
			// Nothing of the object looked at yet: the space before it goes.
			f.pending = f.pending[skipSpace(f.pending, 0):]
			if len(f.pending) > 0 && f.pending[0] != '{' {
				return fmt.Errorf("kube: a watch's stream holds %q where an object starts", f.pending[0])
			}
		}
		if end, ok := f.end.find(f.pending); ok {
			f.frame, f.pending = f.pending[:end], f.pending[end:]
			return nil
		}
		if len(f.pending) > maxFrame {
			return fmt.Errorf("kube: a watch's stream holds an object longer than %d bytes", maxFrame)
		}
		if f.err != nil {
			if errors.Is(f.err, io.EOF) && len(f.pending) > 0 {
				return io.ErrUnexpectedEOF
			}
			return f.err
		}
		var line []byte
		if line, f.err = f.in.ReadSlice('\n'); errors.Is(f.err, bufio.ErrBufferFull) {
			f.err = nil
		}
		f.pending = append(f.pending, line...)
		f.buf = f.pending[:0]
	}
}

// maxFrame is the longest object a watch's stream is read for, as
// client-go's streaming decoder's: far beyond the API server's own limit.
const maxFrame = 16 << 20

// objectEnd finds where a JSON object or array ends in data, which starts
// with it and may grow between calls: each call goes on from where the
// last stopped. The brackets are counted outside strings.
type objectEnd struct {
	pos   int  // data's next byte to look at
	depth int  // the brackets open at pos
	str   int  // the opening quote of the string pos is in
	inStr bool // pos is in a string
}

// find returns the index just past the object's end, and true, or false
// when data doesn't hold its end yet.
func (s *objectEnd) find(data []byte) (int, bool) {
	pos, depth := s.pos, s.depth // in registers, not through s, byte by byte
	if s.inStr {
		end, ok := stringEnd(data, s.str, pos)
		if !ok {
			s.pos = len(data)
			return 0, false
		}
		pos, s.inStr = end, false
	}
	for pos < len(data) {
		switch data[pos] {
		case '"':
			end, ok := stringEnd(data, pos, pos+1)
			if !ok {
				s.pos, s.depth, s.str, s.inStr = len(data), depth, pos, true
				return 0, false
			}
			pos = end
			continue
		case '{', '[':
			depth++
		case '}', ']':
			if depth--; depth == 0 {
				s.pos, s.depth = pos+1, 0
				return pos + 1, true
			}
		}
		pos++
	}
	s.pos, s.depth = pos, depth
	return 0, false
}

// topLevel calls f with the key, the member whole (from its key's opening
// quote to its value's end) and the value of each member of the JSON
// object data, in order, each a slice of data: nothing is decoded but a
// key with an escape or a byte that isn't UTF-8 in it, which is unquoted
// as encoding/json does (an invalid byte becomes U+FFFD). It stops at f's
// first error, and returns an error for data that isn't an object; it
// doesn't check that the values themselves are valid JSON, which the
// decoding of each does.
func topLevel(data []byte, f func(key, member, value []byte) error) error {
	i := skipSpace(data, 0)
	if i == len(data) || data[i] != '{' {
		return errors.New("not a JSON object")
	}
	if i = skipSpace(data, i+1); i < len(data) && data[i] == '}' {
		return nil
	}
	for {
		start := i
		if i == len(data) || data[i] != '"' {
			return errors.New("a JSON object's key doesn't start with a quote")
		}
		end, err := skipString(data, i)
		if err != nil {
			return err
		}
		key := data[i+1 : end-1]
		if bytes.IndexByte(key, '\\') >= 0 || !utf8.Valid(key) {
			var unquoted string
			if err := json.Unmarshal(data[i:end], &unquoted); err != nil {
				return err
			}
			key = []byte(unquoted)
		}
		if i = skipSpace(data, end); i == len(data) || data[i] != ':' {
			return errors.New("a JSON object's key isn't followed by a colon")
		}
		i = skipSpace(data, i+1)
		if end, err = skipValue(data, i); err != nil {
			return err
		}
		if err := f(key, data[start:end], data[i:end]); err != nil {
			return err
		}
		switch i = skipSpace(data, end); {
		case i == len(data):
			return errors.New("a JSON object doesn't end")
		case data[i] == '}':
			return nil
		case data[i] != ',':
			return errors.New("a JSON object's member isn't followed by a comma")
		}
		i = skipSpace(data, i+1)
	}
}

// skipSpace is the index of the first byte of data from i on that isn't
// JSON's whitespace, or len(data).
func skipSpace(data []byte, i int) int {
	for i < len(data) && (data[i] == ' ' || data[i] == '\n' || data[i] == '\r' || data[i] == '\t') {
		i++
	}
	return i
}

// skipString is the index just past the JSON string that starts at i.
func skipString(data []byte, i int) (int, error) {
	end, ok := stringEnd(data, i, i+1)
	if !ok {
		return 0, errors.New("a JSON string doesn't end")
	}
	return end, nil
}

// stringEnd is the index just past the JSON string whose opening quote is
// at start, its closing quote looked for from from on: the first quote not
// escaped, which is not after an odd run of backslashes. It is false when
// data doesn't hold it.
func stringEnd(data []byte, start, from int) (int, bool) {
	for j := from; ; j++ {
		k := bytes.IndexByte(data[j:], '"')
		if k < 0 {
			return 0, false
		}
		j += k
		escaped := false
		for b := j - 1; b > start && data[b] == '\\'; b-- {
			escaped = !escaped
		}
		if !escaped {
			return j + 1, true
		}
	}
}

// skipValue is the index just past the JSON value that starts at i: a
// string, an object or an array, whose brackets are counted outside its
// strings, or a literal, which runs to the next delimiter.
func skipValue(data []byte, i int) (int, error) {
	if i == len(data) {
		return 0, errors.New("a JSON value is missing")
	}
	switch data[i] {
	case '"':
		return skipString(data, i)
	case '{', '[':
		var e objectEnd
		if end, ok := e.find(data[i:]); ok {
			return i + end, nil
		}
		return 0, errors.New("a JSON object or array doesn't end")
	}
	j := i
	for j < len(data) && !delimiter(data[j]) {
		j++
	}
	if j == i {
		return 0, fmt.Errorf("a JSON value starts with %q", data[i])
	}
	return j, nil
}

// delimiter reports whether b ends a JSON literal.
func delimiter(b byte) bool {
	switch b {
	case ',', '}', ']', ' ', '\n', '\r', '\t':
		return true
	}
	return false
}
