package control

import "github.com/shaperd/shaperd/internal/control/jsonout"

// The types of this package travel on the control protocol (/v1) with
// their `json` tags, which stay as they are for older clients and
// daemons. shaperctl --json prints them in the shape of docs/json.md
// (package jsonout): `out` tags rename keys, and the Extra methods below
// add computed keys.

// usersWord is an interface direction in the words of users' rates:
// "download" for egress, "upload" for ingress ("" stays "").
func usersWord(ifaceDirection string) string {
	switch ifaceDirection {
	case "egress":
		return "download"
	case "ingress":
		return "upload"
	}
	return ifaceDirection
}

// Extra adds direction: the users' word for the interface's direction.
func (i InterfaceStatus) Extra() []jsonout.Field {
	return []jsonout.Field{{Key: "direction", Value: usersWord(i.Direction)}}
}

// Extra adds direction: the users' word for the interface's direction.
func (i InterfaceResult) Extra() []jsonout.Field {
	return []jsonout.Field{{Key: "direction", Value: usersWord(i.Direction)}}
}

// Extra adds cleared, the number of overrides removed (the list is
// cleared_overrides), as clear --fleet prints it.
func (r ClearResponse) Extra() []jsonout.Field {
	return []jsonout.Field{{Key: "cleared", Value: len(r.Cleared)}}
}
