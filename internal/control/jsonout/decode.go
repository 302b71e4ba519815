package jsonout

import (
	"bytes"
	"encoding"
	"encoding/json"
	"fmt"
	"reflect"
	"strconv"
	"time"
)

// Decode reads data, JSON in the shape Encode writes, into v (a pointer):
// Encode's inverse, for Go programs and tests that read shaperctl --json
// into the control types. Keys v has no field for are ignored.
func Decode(data []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var x any
	if err := dec.Decode(&x); err != nil {
		return err
	}
	rv := reflect.ValueOf(v)
	if rv.Kind() != reflect.Pointer || rv.IsNil() {
		return fmt.Errorf("jsonout.Decode: want a non-nil pointer, got %T", v)
	}
	return fill(rv.Elem(), x)
}

var textUnmarshalerType = reflect.TypeFor[encoding.TextUnmarshaler]()

func fill(rv reflect.Value, x any) error {
	if x == nil {
		return nil
	}
	t := rv.Type()
	switch t {
	case rateType, sizeType:
		n, ok := x.(json.Number)
		if !ok {
			return fmt.Errorf("%v: want an integer for %s", x, t)
		}
		u, err := strconv.ParseUint(string(n), 10, 64)
		if err != nil {
			return fmt.Errorf("%v: want an integer for %s: %w", x, t, err)
		}
		rv.SetUint(u)
		return nil
	case timeType:
		s, _ := x.(string)
		tm, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			return err
		}
		rv.Set(reflect.ValueOf(tm))
		return nil
	case durType:
		s, _ := x.(string)
		d, err := time.ParseDuration(s)
		if err != nil {
			return err
		}
		rv.SetInt(int64(d))
		return nil
	}
	if s, ok := x.(string); ok && reflect.PointerTo(t).Implements(textUnmarshalerType) {
		return rv.Addr().Interface().(encoding.TextUnmarshaler).UnmarshalText([]byte(s))
	}
	switch t.Kind() {
	case reflect.Pointer:
		p := reflect.New(t.Elem())
		if err := fill(p.Elem(), x); err != nil {
			return err
		}
		rv.Set(p)
		return nil
	case reflect.Struct:
		m, ok := x.(map[string]any)
		if !ok {
			return fmt.Errorf("want an object for %s", t)
		}
		return fillStruct(rv, m)
	case reflect.Slice:
		if s, ok := x.(string); ok && t.Elem().Kind() == reflect.Uint8 {
			rv.SetBytes([]byte(s))
			return nil
		}
		a, ok := x.([]any)
		if !ok {
			return fmt.Errorf("want a list for %s", t)
		}
		sl := reflect.MakeSlice(t, len(a), len(a))
		for i := range a {
			if err := fill(sl.Index(i), a[i]); err != nil {
				return err
			}
		}
		rv.Set(sl)
		return nil
	case reflect.Map:
		m, ok := x.(map[string]any)
		if !ok || t.Key().Kind() != reflect.String {
			break
		}
		mv := reflect.MakeMapWithSize(t, len(m))
		for k, e := range m {
			ev := reflect.New(t.Elem()).Elem()
			if err := fill(ev, e); err != nil {
				return err
			}
			mv.SetMapIndex(reflect.ValueOf(k).Convert(t.Key()), ev)
		}
		rv.Set(mv)
		return nil
	}
	b, err := json.Marshal(x)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, rv.Addr().Interface())
}

func fillStruct(rv reflect.Value, m map[string]any) error {
	t := rv.Type()
	for i := range t.NumField() {
		sf := t.Field(i)
		if !sf.IsExported() && !sf.Anonymous {
			continue
		}
		key, _, ok := fieldKey(sf)
		if !ok {
			continue
		}
		fv := rv.Field(i)
		if sf.Anonymous && key == "" {
			if sf.Type.Kind() == reflect.Pointer && sf.Type.Elem().Kind() == reflect.Struct {
				fv.Set(reflect.New(sf.Type.Elem()))
				fv = fv.Elem()
			}
			if fv.Kind() == reflect.Struct {
				if err := fillStruct(fv, m); err != nil {
					return err
				}
				continue
			}
		}
		if key == "" {
			key = sf.Name
		}
		x, ok := m[key]
		if !ok {
			continue
		}
		if err := fill(fv, x); err != nil {
			return fmt.Errorf("%s: %w", key, err)
		}
	}
	return nil
}
