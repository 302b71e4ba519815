package jsonout

import (
	"bytes"
	"encoding"
	"encoding/json"
	"fmt"
	"io"
	"reflect"
	"strings"
	"time"

	"github.com/shaperd/shaperd/pkg/tbf"
)

// Field is one key of an object, in order.
type Field struct {
	Key   string
	Value any
}

// Object is a JSON object that keeps its keys in order.
type Object []Field

// MarshalJSON writes the fields in order.
func (o Object) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, f := range o {
		if i > 0 {
			b.WriteByte(',')
		}
		k, err := json.Marshal(f.Key)
		if err != nil {
			return nil, err
		}
		v, err := json.Marshal(f.Value)
		if err != nil {
			return nil, fmt.Errorf("key %s: %w", f.Key, err)
		}
		b.Write(k)
		b.WriteByte(':')
		b.Write(v)
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

// Extender is a type that adds computed keys to its object (after its
// fields): a count next to a list, a direction in users' words.
type Extender interface {
	Extra() []Field
}

// Encode writes v as indented JSON in the shape of this package, with a
// newline.
func Encode(w io.Writer, v any) error {
	return encode(w, v, "  ")
}

// EncodeLine writes v on one line (top's snapshots: one line each).
func EncodeLine(w io.Writer, v any) error {
	return encode(w, v, "")
}

func encode(w io.Writer, v any, indent string) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", indent)
	if err := enc.Encode(Value(v)); err != nil {
		return fmt.Errorf("writing JSON: %w", err)
	}
	return nil
}

var (
	rateType      = reflect.TypeFor[tbf.Rate]()
	sizeType      = reflect.TypeFor[tbf.Size]()
	timeType      = reflect.TypeFor[time.Time]()
	durType       = reflect.TypeFor[time.Duration]()
	rawType       = reflect.TypeFor[json.RawMessage]()
	textType      = reflect.TypeFor[encoding.TextMarshaler]()
	marshalerType = reflect.TypeFor[json.Marshaler]()
	extendType    = reflect.TypeFor[Extender]()
)

// Value converts v to a tree of Object, []any and JSON scalars in the
// shape of this package (see the package doc).
func Value(v any) any {
	if v == nil {
		return nil
	}
	return value(reflect.ValueOf(v))
}

func value(v reflect.Value) any {
	if !v.IsValid() {
		return nil
	}
	t := v.Type()
	switch t {
	case rateType, sizeType:
		return v.Uint()
	case timeType:
		return v.Interface().(time.Time).Format(time.RFC3339Nano)
	case durType:
		return time.Duration(v.Int()).String()
	case rawType:
		if v.Len() == 0 {
			return nil
		}
		return json.RawMessage(v.Bytes())
	}
	switch t.Kind() {
	case reflect.Pointer, reflect.Interface:
		if v.IsNil() {
			return nil
		}
		return value(v.Elem())
	case reflect.Struct:
		if t.Implements(textType) && !t.Implements(extendType) {
			return marshaled(v)
		}
		return object(v)
	case reflect.Slice:
		if t.Elem().Kind() == reflect.Uint8 {
			return string(v.Bytes()) // text, not base64
		}
		fallthrough
	case reflect.Array:
		out := make([]any, v.Len())
		for i := range out {
			out[i] = value(v.Index(i))
		}
		return out
	case reflect.Map:
		if t.Key().Kind() != reflect.String {
			return marshaled(v)
		}
		m := make(map[string]any, v.Len())
		for it := v.MapRange(); it.Next(); {
			m[it.Key().String()] = value(it.Value())
		}
		return m
	}
	if t.Implements(marshalerType) || t.Implements(textType) {
		return marshaled(v)
	}
	return v.Interface()
}

// marshaled is v as encoding/json writes it.
func marshaled(v reflect.Value) any {
	b, err := json.Marshal(v.Interface())
	if err != nil {
		return fmt.Sprintf("(%v)", err)
	}
	return json.RawMessage(b)
}

// object is struct v's fields as keys, embedded structs' fields in line,
// then its Extra.
func object(v reflect.Value) Object {
	var out Object
	t := v.Type()
	for i := range t.NumField() {
		sf := t.Field(i)
		if !sf.IsExported() && !sf.Anonymous {
			continue
		}
		key, omitEmpty, ok := fieldKey(sf)
		if !ok {
			continue
		}
		fv := v.Field(i)
		if sf.Anonymous && key == "" {
			ft := sf.Type
			if ft.Kind() == reflect.Pointer {
				if fv.IsNil() {
					continue
				}
				fv, ft = fv.Elem(), ft.Elem()
			}
			if ft.Kind() == reflect.Struct {
				out = append(out, object(fv)...)
				continue
			}
		}
		if key == "" {
			key = sf.Name
		}
		if omitEmpty && (fv.IsZero() || (fv.Kind() == reflect.Slice || fv.Kind() == reflect.Map) && fv.Len() == 0) {
			continue
		}
		val := value(fv)
		if fv.Kind() == reflect.Slice && fv.IsNil() && fv.Type().Elem().Kind() != reflect.Uint8 {
			val = []any{}
		}
		if fv.Kind() == reflect.Map && fv.IsNil() {
			val = map[string]any{}
		}
		out = set(out, key, val)
	}
	if e, ok := v.Interface().(Extender); ok {
		for _, f := range e.Extra() {
			out = set(out, f.Key, Value(f.Value))
		}
	}
	return out
}

// set puts key in o, replacing an earlier key of the same name (an outer
// field or Extra wins over an embedded one).
func set(o Object, key string, val any) Object {
	for i := range o {
		if o[i].Key == key {
			o[i].Value = val
			return o
		}
	}
	return append(o, Field{key, val})
}

// fieldKey is the key of sf ("" for an embedded struct to inline), whether
// it is left out when zero, and false when it is not printed.
func fieldKey(sf reflect.StructField) (key string, omitEmpty, ok bool) {
	tag, has := sf.Tag.Lookup("out")
	if !has {
		tag, has = sf.Tag.Lookup("json")
	}
	if !has {
		return "", false, true
	}
	name, opts, _ := strings.Cut(tag, ",")
	if name == "-" && opts == "" {
		return "", false, false
	}
	for _, o := range strings.Split(opts, ",") {
		if o == "omitempty" || o == "omitzero" {
			omitEmpty = true
		}
	}
	return name, omitEmpty, true
}
