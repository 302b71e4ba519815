package control

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"strings"
	"time"

	"github.com/shaperd/shaperd/pkg/tbf"
)

// decodeBody decodes exactly one JSON object into v (a pointer to a request
// struct) and is strict where encoding/json is lenient: a field name must
// match its tag exactly (encoding/json would take "TARGET" for "target"), a
// field may appear once (encoding/json keeps the last), and unknown fields
// and trailing data are refused. It returns the raw value of every field
// present, by name. Errors are *BadRequestError, or an error wrapping
// *http.MaxBytesError when the body is over the server's limit.
func decodeBody(body io.Reader, v any) (map[string]json.RawMessage, error) {
	fields := jsonFields(v)
	dec := json.NewDecoder(body)
	dec.UseNumber()
	tok, err := dec.Token()
	if err != nil {
		return nil, bodyError(err)
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return nil, BadRequest("request body: expected a JSON object, got %s", describeToken(tok))
	}
	raw := map[string]json.RawMessage{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, bodyError(err)
		}
		name, _ := tok.(string) // object keys are always strings
		f, ok := fields[name]
		if !ok {
			return nil, BadRequest("request body: unknown field %q%s", name, suggestField(name, fields))
		}
		if _, dup := raw[name]; dup {
			return nil, BadRequest("request body: field %q given twice", name)
		}
		var val json.RawMessage
		if err := dec.Decode(&val); err != nil {
			return nil, bodyError(err)
		}
		raw[name] = val
		if err := json.Unmarshal(val, f.Addr().Interface()); err != nil {
			return nil, fieldError(name, f.Type(), val, err)
		}
	}
	if _, err := dec.Token(); err != nil { // the closing '}'
		return nil, bodyError(err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return nil, bodyError(err)
		}
		return nil, BadRequest("request body: unexpected data after the JSON object")
	}
	return raw, nil
}

// jsonFields maps the JSON names of v's struct fields (v is a pointer to a
// struct) to the fields. Fields tagged "-" are left out.
func jsonFields(v any) map[string]reflect.Value {
	rv := reflect.ValueOf(v).Elem()
	rt := rv.Type()
	out := make(map[string]reflect.Value, rt.NumField())
	for i := range rt.NumField() {
		name, _, _ := strings.Cut(rt.Field(i).Tag.Get("json"), ",")
		if name == "" || name == "-" || !rt.Field(i).IsExported() {
			continue
		}
		out[name] = rv.Field(i)
	}
	return out
}

// suggestField names the field a wrongly spelt or cased name was probably
// meant to be.
func suggestField(name string, fields map[string]reflect.Value) string {
	for f := range fields {
		if strings.EqualFold(f, name) {
			return fmt.Sprintf(" (field names are lower case: %q)", f)
		}
	}
	return ""
}

// bodyError describes a syntax or read error of the body.
func bodyError(err error) error {
	var mbe *http.MaxBytesError
	switch {
	case errors.As(err, &mbe):
		return fmt.Errorf("request body larger than %d bytes: %w", mbe.Limit, err)
	case errors.Is(err, io.EOF):
		return BadRequest("request body: empty; expected a JSON object")
	case errors.Is(err, io.ErrUnexpectedEOF):
		return BadRequest("request body: truncated JSON")
	}
	return BadRequest("request body: %v", err)
}

// fieldError describes a value that does not fit its field.
func fieldError(name string, t reflect.Type, val json.RawMessage, err error) error {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		return BadRequest("request body: field %q: got %s, want %s", name, describeRaw(val), wantOf(t))
	}
	return BadRequest("request body: field %q: %v", name, err)
}

// wantOf says what JSON a field of type t takes, for messages.
func wantOf(t reflect.Type) string {
	if t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t {
	case reflect.TypeFor[tbf.Rate]():
		return `a rate string such as "10mbit"`
	case reflect.TypeFor[Duration](), reflect.TypeFor[time.Duration]():
		return `a duration string such as "2s"`
	}
	if t.Kind() == reflect.String {
		return "a string"
	}
	return t.String()
}

// describeRaw names the JSON type of a raw value ("a number").
func describeRaw(val json.RawMessage) string {
	val = bytes.TrimSpace(val)
	if len(val) == 0 {
		return "nothing"
	}
	switch val[0] {
	case '"':
		return "a string"
	case '{':
		return "an object"
	case '[':
		return "an array"
	case 't', 'f':
		return "a boolean"
	case 'n':
		return "null"
	}
	return "a number"
}

// describeToken names a top-level token for messages.
func describeToken(tok json.Token) string {
	switch t := tok.(type) {
	case json.Delim:
		if t == '[' {
			return "an array"
		}
		return string(t)
	case string:
		return "a string"
	case json.Number, float64:
		return "a number"
	case bool:
		return "a boolean"
	case nil:
		return "null"
	}
	return fmt.Sprintf("%v", tok)
}
