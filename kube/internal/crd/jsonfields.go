package crd

import (
	"cmp"
	"reflect"
	"slices"
	"strings"
	"unicode"
)

// This file holds encoding/json's rules for which fields of a struct it
// writes, and by what names: the rules of its typeFields, which a schema
// must follow to describe what encoding/json writes.

// jsonOpts are the options of a json tag that change a field's schema.
type jsonOpts struct {
	omitEmpty, omitZero, quoted bool
}

// jsonField is one field of a struct's JSON encoding.
type jsonField struct {
	name       string
	index      []int
	typ        reflect.Type // as declared
	tagged     bool
	opts       jsonOpts
	viaPointer bool // promoted through an embedded pointer, so left out when it is nil
}

// structEncoding is what encoding/json writes for a struct.
type structEncoding struct {
	fields  []jsonField
	inlined []reflect.Type // the embedded structs whose fields are inlined
}

// jsonFields returns the fields encoding/json writes for struct t, by its
// rules: exported fields named by their json tags, json:"-" left out, the
// fields of embedded structs without a json name inlined, and of two fields
// with one name, the shallower, or the tagged one at the same depth; when
// neither wins, both are left out. The fields are in the order of their
// indexes, and the inlined structs shallowest first.
func jsonFields(t reflect.Type) structEncoding {
	enc := collectFields(t)
	enc.fields = dominantFields(enc.fields)
	return enc
}

// embedded is a struct whose fields encoding/json writes as its own: the
// struct being encoded, or one it embeds without a json name, at any depth.
type embedded struct {
	typ        reflect.Type
	index      []int // where it is in the struct being encoded; nil for that struct
	viaPointer bool  // embedded through a pointer, here or at a shallower depth
	count      int   // how many times typ is embedded at its depth
}

// collectFields returns every field of t's encoding, and of the structs it
// inlines, depth by depth, before dominantFields picks one of each name. A
// struct is scanned once, at the shallowest depth it is at; a field of a
// struct embedded twice at that depth is listed twice, so that neither
// dominates the other and both are left out.
func collectFields(t reflect.Type) structEncoding {
	var enc structEncoding
	visited := map[reflect.Type]bool{}
	for depth := []embedded{{typ: t, count: 1}}; len(depth) > 0; {
		depth = enc.collectDepth(depth, visited)
	}
	return enc
}

// collectDepth adds to enc the fields of the structs at one depth that no
// shallower depth held, and returns the structs they embed, the next depth:
// each type once, counted.
func (enc *structEncoding) collectDepth(depth []embedded, visited map[reflect.Type]bool) []embedded {
	var next []embedded
	at := map[reflect.Type]int{} // each type's place in next
	for _, e := range depth {
		if visited[e.typ] {
			continue
		}
		visited[e.typ] = true
		if e.index != nil {
			enc.inlined = append(enc.inlined, e.typ)
		}
		fields, inline := ownFields(e)
		enc.fields = append(enc.fields, fields...)
		if e.count > 1 {
			// Embedded twice at this depth: a copy, so that neither
			// dominates.
			enc.fields = append(enc.fields, fields...)
		}
		for _, x := range inline {
			if i, ok := at[x.typ]; ok {
				next[i].count++
				continue
			}
			at[x.typ] = len(next)
			next = append(next, x)
		}
	}
	return next
}

// ownFields returns the fields of e's struct that encoding/json writes, and
// the structs it embeds without a json name, whose fields it writes instead.
func ownFields(e embedded) (fields []jsonField, inline []embedded) {
	for i := range e.typ.NumField() {
		sf := e.typ.Field(i)
		if !mayEncode(sf) {
			continue
		}
		name, opts := parseTag(sf.Tag.Get("json"))
		index := append(slices.Clip(e.index), i)
		if st, viaPointer, ok := inlinedStruct(sf, name); ok {
			inline = append(inline, embedded{typ: st, index: index, viaPointer: e.viaPointer || viaPointer, count: 1})
			continue
		}
		fields = append(fields, jsonField{
			name:       cmp.Or(name, sf.Name),
			index:      index,
			typ:        sf.Type,
			tagged:     name != "",
			opts:       opts,
			viaPointer: e.viaPointer,
		})
	}
	return fields, inline
}

// mayEncode reports whether encoding/json writes sf, or the fields promoted
// through it: an exported field, or an embedded struct (or pointer to one)
// of an unexported type, whose fields may be exported; never a field tagged
// json:"-".
func mayEncode(sf reflect.StructField) bool {
	if sf.Tag.Get("json") == "-" {
		return false
	}
	if sf.IsExported() {
		return true
	}
	t := sf.Type
	if t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return sf.Anonymous && t.Kind() == reflect.Struct
}

// inlinedStruct returns the struct whose fields encoding/json writes in
// place of sf, whose json name is name, and whether sf points to it: ok is
// true only for an embedded struct, or pointer to one, without a json name.
func inlinedStruct(sf reflect.StructField, name string) (st reflect.Type, viaPointer, ok bool) {
	st = sf.Type
	if st.Name() == "" && st.Kind() == reflect.Pointer {
		st, viaPointer = st.Elem(), true
	}
	return st, viaPointer, name == "" && sf.Anonymous && st.Kind() == reflect.Struct
}

// parseTag returns a json tag's name and options. The name is "" when the
// tag gives none, or one encoding/json refuses; then the field is named by
// its Go name.
func parseTag(tag string) (string, jsonOpts) {
	name, list, _ := strings.Cut(tag, ",")
	if !isValidTag(name) {
		name = ""
	}
	var opts jsonOpts
	for o := range strings.SplitSeq(list, ",") {
		switch o {
		case "omitempty":
			opts.omitEmpty = true
		case "omitzero":
			opts.omitZero = true
		case "string":
			opts.quoted = true
		}
	}
	return name, opts
}

// isValidTag is encoding/json's test of a json tag's name.
func isValidTag(s string) bool {
	if s == "" {
		return false
	}
	for _, c := range s {
		switch {
		case strings.ContainsRune("!#$%&()*+-./:;<=>?@[]^_{|}~ ", c):
		case !unicode.IsLetter(c) && !unicode.IsDigit(c):
			return false
		}
	}
	return true
}

// isQuotable reports whether encoding/json's ",string" option applies to
// a field of type t: a bool, number or string, or an unnamed pointer to
// one, which it writes as a JSON string.
func isQuotable(t reflect.Type) bool {
	if t.Kind() == reflect.Pointer && t.Name() == "" {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.Bool,
		reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr,
		reflect.Float32, reflect.Float64, reflect.String:
		return true
	}
	return false
}

// dominantFields returns, of each name's fields, the one encoding/json
// writes (see dominantField), in the order of their indexes. It reorders
// fields, and reuses its array.
func dominantFields(fields []jsonField) []jsonField {
	slices.SortFunc(fields, compareByName)
	out := fields[:0]
	for len(fields) > 0 {
		n := 1
		for n < len(fields) && fields[n].name == fields[0].name {
			n++
		}
		if f, ok := dominantField(fields[:n]); ok {
			out = append(out, f)
		}
		fields = fields[n:]
	}
	slices.SortFunc(out, func(a, b jsonField) int { return slices.Compare(a.index, b.index) })
	return out
}

// compareByName orders fields by name, then by depth, shallowest first,
// then tagged before untagged, then by index: each name's fields in the
// order dominantField reads them.
func compareByName(a, b jsonField) int {
	if c := strings.Compare(a.name, b.name); c != 0 {
		return c
	}
	if c := cmp.Compare(len(a.index), len(b.index)); c != 0 {
		return c
	}
	if a.tagged != b.tagged {
		if a.tagged {
			return -1
		}
		return +1
	}
	return slices.Compare(a.index, b.index)
}

// dominantField returns the one of fields, all of one name and in
// compareByName's order, that encoding/json writes: the shallowest, and of
// the shallowest the tagged one. When two are as shallow and both tagged or
// both not, neither dominates, and ok is false: encoding/json writes none.
func dominantField(fields []jsonField) (f jsonField, ok bool) {
	if len(fields) > 1 && len(fields[0].index) == len(fields[1].index) && fields[0].tagged == fields[1].tagged {
		return jsonField{}, false
	}
	return fields[0], true
}

// JSONField is one field of a struct that encoding/json writes, by its
// rules: its name, where it is (for reflect.Value.FieldByIndexErr, which
// fails through a nil embedded pointer, when encoding/json leaves the field
// out), and the options of its tag that leave it out or quote it.
type JSONField struct {
	Name                        string
	Index                       []int
	OmitEmpty, OmitZero, Quoted bool
}

// JSONFields returns the fields encoding/json writes for struct t, in the
// order of their indexes: jsonFields' rules, for package admission's
// encoding of a Go value into JSON's values without writing it.
func JSONFields(t reflect.Type) []JSONField {
	fields := jsonFields(t).fields
	out := make([]JSONField, len(fields))
	for i, f := range fields {
		out[i] = JSONField{Name: f.name, Index: f.index, OmitEmpty: f.opts.omitEmpty, OmitZero: f.opts.omitZero, Quoted: f.opts.quoted}
	}
	return out
}
