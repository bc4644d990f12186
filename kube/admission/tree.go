package admission

import (
	"bytes"
	"encoding"
	"encoding/json"
	"fmt"
	"reflect"
	"strconv"
	"sync"
	"unicode/utf8"

	"github.com/z5labs/humus/kube/internal/crd"
)

// jsonValue returns what decoding v's encoding/json encoding with
// UseNumber gives, without writing it: a map[string]any for an object, a
// []any for an array, a string, a json.Number, a bool or nil, the strings
// shared with v. A defaulting review's patch is computed from the object
// before and after the DefaultFunc so, with no encoding of the object to
// decode again: what encoding/json writes by a type's own MarshalJSON or
// MarshalText, and a float, is encoded and decoded, which such values,
// small, afford.
func jsonValue(v reflect.Value) (any, error) {
	t := v.Type()
	if encodesItself(v) {
		return encoded(v)
	}
	switch t.Kind() {
	case reflect.Pointer, reflect.Interface:
		if v.IsNil() {
			return nil, nil
		}
		return jsonValue(v.Elem())
	case reflect.Struct:
		return jsonStruct(v)
	case reflect.Map:
		if v.IsNil() {
			return nil, nil
		}
		if t.Key().Kind() != reflect.String {
			return encoded(v)
		}
		return jsonMap(v)
	case reflect.Slice, reflect.Array:
		if t.Kind() == reflect.Slice && v.IsNil() {
			return nil, nil
		}
		if t.Kind() == reflect.Slice && t.Elem().Kind() == reflect.Uint8 {
			return encoded(v) // base64, unless its items encode themselves
		}
		return jsonList(v)
	case reflect.String:
		if s := v.String(); t != numberType && utf8.ValidString(s) {
			return s, nil
		}
		return encoded(v) // a json.Number, or invalid UTF-8, which encoding/json replaces
	case reflect.Bool:
		return v.Bool(), nil
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return json.Number(strconv.FormatInt(v.Int(), 10)), nil
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return json.Number(strconv.FormatUint(v.Uint(), 10)), nil
	}
	return encoded(v) // floats, and what encoding/json refuses, with its error
}

// jsonStruct is jsonValue of a struct that doesn't encode itself.
func jsonStruct(v reflect.Value) (any, error) {
	fields := structFields(v.Type())
	out := map[string]any{}
	for _, f := range fields {
		if f.Quoted {
			return encoded(v) // rare: encoding/json's ",string"
		}
		fv, err := v.FieldByIndexErr(f.Index)
		if err != nil {
			continue // through a nil embedded pointer: left out
		}
		if (f.OmitEmpty && isEmpty(fv)) || (f.OmitZero && isZero(fv)) {
			continue
		}
		if out[f.Name], err = jsonValue(fv); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// jsonMap is jsonValue of a map of string keys, not nil.
func jsonMap(v reflect.Value) (any, error) {
	out := make(map[string]any, v.Len())
	for it := v.MapRange(); it.Next(); {
		x, err := jsonValue(it.Value())
		if err != nil {
			return nil, err
		}
		out[it.Key().String()] = x
	}
	return out, nil
}

// jsonList is jsonValue of an array, or of a slice that isn't nil.
func jsonList(v reflect.Value) (any, error) {
	out := make([]any, v.Len())
	for i := range out {
		x, err := jsonValue(v.Index(i))
		if err != nil {
			return nil, err
		}
		out[i] = x
	}
	return out, nil
}

var (
	marshalerType     = reflect.TypeFor[json.Marshaler]()
	textMarshalerType = reflect.TypeFor[encoding.TextMarshaler]()
	isZeroerType      = reflect.TypeFor[interface{ IsZero() bool }]()
	numberType        = reflect.TypeFor[json.Number]()
)

// encodesItself reports whether encoding/json writes v by its own
// MarshalJSON or MarshalText: the pointer's methods count only where v is
// addressable, as encoding/json calls them.
func encodesItself(v reflect.Value) bool {
	t := v.Type()
	if t.Implements(marshalerType) || t.Implements(textMarshalerType) {
		return true
	}
	if t.Kind() == reflect.Pointer || !v.CanAddr() {
		return false
	}
	pt := reflect.PointerTo(t)
	return pt.Implements(marshalerType) || pt.Implements(textMarshalerType)
}

// encoded is v encoded by encoding/json and decoded with UseNumber.
func encoded(v reflect.Value) (any, error) {
	x := v.Interface()
	if v.CanAddr() {
		x = v.Addr().Interface() // encoding/json calls the pointer's methods of what it can address
	}
	b, err := json.Marshal(x)
	if err != nil {
		return nil, err
	}
	return decodeJSON(b)
}

// decodeJSON decodes data, keeping each number's text (an int64 stays
// exact). A string, what a type encoding itself mostly writes, is decoded
// without a json.Decoder and its buffer.
func decodeJSON(data []byte) (any, error) {
	if len(data) > 0 && data[0] == '"' {
		var s string
		if err := json.Unmarshal(data, &s); err != nil {
			return nil, err
		}
		return s, nil
	}
	var out any
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	if err := dec.Decode(&out); err != nil {
		return nil, err
	}
	return out, nil
}

// fieldsOf caches structFields.
var fieldsOf sync.Map // reflect.Type -> []crd.JSONField

// structFields returns the fields encoding/json writes of struct t.
func structFields(t reflect.Type) []crd.JSONField {
	if f, ok := fieldsOf.Load(t); ok {
		return f.([]crd.JSONField)
	}
	f, _ := fieldsOf.LoadOrStore(t, crd.JSONFields(t))
	return f.([]crd.JSONField)
}

// isEmpty is encoding/json's test for omitempty.
func isEmpty(v reflect.Value) bool {
	switch v.Kind() {
	case reflect.Array, reflect.Map, reflect.Slice, reflect.String:
		return v.Len() == 0
	case reflect.Bool, reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr,
		reflect.Float32, reflect.Float64, reflect.Interface, reflect.Pointer:
		return v.IsZero()
	}
	return false
}

// isZero is encoding/json's test for omitzero: the type's IsZero method,
// where it has one, or the zero value.
func isZero(v reflect.Value) bool {
	t := v.Type()
	switch {
	case t.Kind() == reflect.Interface && t.Implements(isZeroerType):
		return v.IsNil() || (v.Elem().Kind() == reflect.Pointer && v.Elem().IsNil()) || v.Interface().(interface{ IsZero() bool }).IsZero()
	case t.Kind() == reflect.Pointer && t.Implements(isZeroerType):
		return v.IsNil() || v.Interface().(interface{ IsZero() bool }).IsZero()
	case t.Implements(isZeroerType):
		return v.Interface().(interface{ IsZero() bool }).IsZero()
	case reflect.PointerTo(t).Implements(isZeroerType):
		if !v.CanAddr() {
			c := reflect.New(t).Elem()
			c.Set(v)
			v = c
		}
		return v.Addr().Interface().(interface{ IsZero() bool }).IsZero()
	}
	return v.IsZero()
}

// jsonOf is jsonValue of the value p points to, its error naming p's type
// as marshal's does.
func jsonOf(p any) (any, error) {
	x, err := jsonValue(reflect.ValueOf(p))
	if err != nil {
		return nil, fmt.Errorf("encoding the %T: %w", p, err)
	}
	return x, nil
}

// jsonEqual is reflect.DeepEqual of two of jsonValue's values, without
// its record of the maps and slices it has compared.
func jsonEqual(a, b any) bool {
	switch a := a.(type) {
	case map[string]any:
		b, ok := b.(map[string]any)
		if !ok || len(a) != len(b) || (a == nil) != (b == nil) {
			return false
		}
		for k, av := range a {
			bv, ok := b[k]
			if !ok || !jsonEqual(av, bv) {
				return false
			}
		}
		return true
	case []any:
		b, ok := b.([]any)
		if !ok || len(a) != len(b) || (a == nil) != (b == nil) {
			return false
		}
		for i := range a {
			if !jsonEqual(a[i], b[i]) {
				return false
			}
		}
		return true
	case string, json.Number, bool, nil:
		return a == b
	}
	return reflect.DeepEqual(a, b)
}
