package admission

import (
	"fmt"
	"reflect"
	"strings"
	"unsafe"
)

// FieldOf names a field of type V of a policy's objects, by pointer, as
// kube.Field names a field for a CRD's rules: a misspelled field doesn't
// compile, and a Default of the wrong type doesn't either. Field makes
// one.
type FieldOf[V any] struct {
	ptr unsafe.Pointer
}

// Field names the field p points to: a field of the object a Policy is
// given, or of a struct it holds by value, such as &w.Spec.Port.
func Field[V any](p *V) FieldOf[V] { return FieldOf[V]{ptr: unsafe.Pointer(p)} }

// Ref is a FieldOf of any type: a field a Validation's expression names.
type Ref interface {
	// path returns the field's JSON names from the object's root, given
	// the object's address and type.
	path(base unsafe.Pointer, root reflect.Type) ([]string, error)
}

func (f FieldOf[V]) path(base unsafe.Pointer, root reflect.Type) ([]string, error) {
	return fieldPath(base, root, f.ptr, reflect.TypeFor[V]())
}

// fieldPath returns the JSON names of the field of type t at p in the
// value of type root at base: the fields encoding/json writes, an
// embedded struct without a name inlined.
func fieldPath(base unsafe.Pointer, root reflect.Type, p unsafe.Pointer, t reflect.Type) ([]string, error) {
	if p == nil {
		return nil, fmt.Errorf("a Field of a nil pointer")
	}
	off := uintptr(p) - uintptr(base)
	if uintptr(p) < uintptr(base) || off >= root.Size() {
		return nil, fmt.Errorf("a Field of a %s that isn't a field of the %s the Policy was given: name a field of that value, such as &obj.Spec.Port", t, root)
	}
	var names []string
	typ := root
	for {
		if off == 0 && typ == t && len(names) > 0 {
			return names, nil
		}
		if typ.Kind() != reflect.Struct {
			break
		}
		found := false
		for i := range typ.NumField() {
			sf := typ.Field(i)
			if off < sf.Offset || off >= sf.Offset+sf.Type.Size() || (off == sf.Offset && sf.Type.Size() == 0) {
				continue
			}
			name, inline, ok := jsonName(sf)
			if !ok {
				return nil, fmt.Errorf("the field %s.%s isn't in the object's JSON encoding (unexported or json:\"-\")", typ, sf.Name)
			}
			if !inline {
				names = append(names, name)
			}
			off -= sf.Offset
			typ = sf.Type
			found = true
			break
		}
		if !found {
			break
		}
	}
	return nil, fmt.Errorf("a Field of a %s that isn't a field of the %s the Policy was given, or is reached through a pointer, a slice or a map: name a field the object holds by value", t, root)
}

// jsonName is sf's name in encoding/json's encoding, and whether it is an
// embedded struct inlined; false when encoding/json leaves it out.
func jsonName(sf reflect.StructField) (name string, inline, ok bool) {
	tag := sf.Tag.Get("json")
	if tag == "-" {
		return "", false, false
	}
	name, _, _ = strings.Cut(tag, ",")
	if sf.Anonymous && name == "" && sf.Type.Kind() == reflect.Struct {
		return "", true, true
	}
	if !sf.IsExported() {
		return "", false, false
	}
	if name == "" {
		name = sf.Name
	}
	return name, false, true
}

// celName is whether name, a property's, is selected in CEL as it is: an
// identifier. An admission policy's object is the object's JSON as it is,
// so a property whose name is a CEL reserved word, such as namespace, is
// selected by its name (object.metadata.namespace), not escaped as a CRD's
// rules escape it (self.metadata.__namespace__).
func celName(name string) bool {
	if name == "" || (name[0] >= '0' && name[0] <= '9') {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if ok := c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'; !ok {
			return false
		}
	}
	return true
}

// celPath is the expression selecting names from object.
func celPath(names []string) (string, error) {
	out := "object"
	for _, n := range names {
		if !celName(n) {
			return "", fmt.Errorf("the property %q isn't a CEL identifier: select it by hand, as %s[%q]", n, out, n)
		}
		out += "." + n
	}
	return out, nil
}
