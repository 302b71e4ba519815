// Package jsonout writes the --json output of shaperctl in one shape
// across commands (docs/json.md):
//
//   - keys are snake_case, taken from a field's `out` tag when it has one
//     (`out:"user"`, `out:"-"` to leave the field out), else from its
//     `json` tag: the control protocol's wire names (/v1) stay as they are
//     while shaperctl prints the shared convention;
//   - rates (tbf.Rate) are JSON integers in bit/s, sizes (tbf.Size)
//     integers in bytes, never tc strings;
//   - []byte is printed as a JSON string (text, never base64);
//   - times are RFC 3339 strings, durations Go duration strings ("2s");
//   - a nil slice is [] and a nil map {} (lists are always lists), unless
//     the field is omitempty;
//   - a type with an Extra() []Field method adds computed keys after its
//     fields (a count next to a list, a direction in users' words).
//
// Error writes the one object a failing --json command prints.
package jsonout
