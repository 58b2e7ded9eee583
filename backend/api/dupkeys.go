package api

import (
	"bytes"
	"encoding"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"

	"github.com/nimbus-build/nimbus/backend/fault"
)

// duplicateKey returns a 400 naming the first key of body (one valid JSON object) that names
// the same thing as an earlier key of its object, or nil. t is the type body is bound into.
//
// "The same thing" is what encoding/json binds the key to, because that is where the earlier
// value is lost: a struct field matches a key exactly or, failing that, without regard to case
// (so "Name" after "name" overwrites it); a map entry matches its key exactly. Below a type
// that decodes itself (UnmarshalJSON, UnmarshalText), an interface, or a key the target lacks,
// keys are compared exactly.
func duplicateKey(body []byte, t reflect.Type) error {
	w := keyWalker{dec: json.NewDecoder(bytes.NewReader(body))}
	dup, err := w.value(t, "")
	if err != nil {
		return bodyError(err)
	}
	if dup == nil {
		return nil
	}
	e := fault.BadRequest("duplicate key %q in the request body", dup.path)
	if dup.first != dup.key {
		e = fault.BadRequest("duplicate key %q in the request body (the same field as %q)", dup.path, dup.first)
	}
	e.Details = map[string]any{"field": dup.path}
	return e
}

// duplicate is a key that repeats an earlier one: its path ("inputs.MODE"), the key as sent
// and the earlier key it clashes with.
type duplicate struct {
	path, key, first string
}

// keyWalker reads one JSON value token by token beside the Go type it binds into.
type keyWalker struct {
	dec *json.Decoder
}

func (w keyWalker) value(t reflect.Type, path string) (*duplicate, error) {
	t = bindTarget(t)
	tok, err := w.dec.Token()
	if err != nil {
		return nil, err
	}
	switch tok {
	case json.Delim('['):
		var elem reflect.Type
		if t != nil && (t.Kind() == reflect.Slice || t.Kind() == reflect.Array) {
			elem = t.Elem()
		}
		for i := 0; w.dec.More(); i++ {
			if dup, err := w.value(elem, fmt.Sprintf("%s[%d]", path, i)); dup != nil || err != nil {
				return dup, err
			}
		}
	case json.Delim('{'):
		seen := map[string]string{} // what a key binds to → the key that bound it first
		for w.dec.More() {
			tok, err := w.dec.Token()
			if err != nil {
				return nil, err
			}
			key, _ := tok.(string)
			sub := key
			if path != "" {
				sub = path + "." + key
			}
			target, elem := member(t, key)
			if first, ok := seen[target]; ok {
				return &duplicate{path: sub, key: key, first: first}, nil
			}
			seen[target] = key
			if dup, err := w.value(elem, sub); dup != nil || err != nil {
				return dup, err
			}
		}
	default:
		return nil, nil // a scalar
	}
	_, err = w.dec.Token() // the closing ']' or '}'
	return nil, err
}

// member is what the key of an object of type t binds to (an identity to compare keys by) and
// the type of its value (nil: unknown, keys below it compare exactly).
func member(t reflect.Type, key string) (target string, elem reflect.Type) {
	switch {
	case t != nil && t.Kind() == reflect.Map:
		return "key " + key, t.Elem()
	case t != nil && t.Kind() == reflect.Struct:
		fields := jsonFields(t)
		for _, f := range fields {
			if f.name == key {
				return "field " + f.name, f.typ
			}
		}
		for _, f := range fields {
			if strings.EqualFold(f.name, key) {
				return "field " + f.name, f.typ
			}
		}
	}
	return "key " + key, nil
}

// bindTarget is the type encoding/json decodes a value of type t into: pointers followed, nil
// for types that decode themselves (their keys mean what they say) and for interfaces.
func bindTarget(t reflect.Type) reflect.Type {
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == nil || t.Kind() == reflect.Interface {
		return nil
	}
	p := reflect.PointerTo(t)
	if p.Implements(reflect.TypeFor[json.Unmarshaler]()) || p.Implements(reflect.TypeFor[encoding.TextUnmarshaler]()) {
		return nil
	}
	return t
}

type jsonField struct {
	name string
	typ  reflect.Type
}

// jsonFields are the fields encoding/json sees in struct type t: exported fields by their tag's
// name (or their own), "-" left out, and the fields of embedded structs without a name
// promoted.
func jsonFields(t reflect.Type) []jsonField {
	var out []jsonField
	for i := range t.NumField() {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, _, _ := strings.Cut(tag, ",")
		if ft := f.Type; f.Anonymous && name == "" {
			if ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if ft.Kind() == reflect.Struct {
				out = append(out, jsonFields(ft)...)
				continue
			}
		}
		if !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		out = append(out, jsonField{name: name, typ: f.Type})
	}
	return out
}
