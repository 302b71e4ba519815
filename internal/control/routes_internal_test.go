package control

import "testing"

// The new endpoints need the roles their shaperctl commands document:
// listing overrides and top read, a quota reset changes.
func TestRouteRoles(t *testing.T) {
	s := NewServer(nil, nil)
	for path, want := range map[string]Role{
		"/v1/status": RoleRead, "/v1/top": RoleRead, "/v1/overrides": RoleRead,
		"/v1/rate": RoleAdmin, "/v1/clear": RoleAdmin, "/v1/reload": RoleAdmin, "/v1/quota/reset": RoleAdmin,
		"/v1/users": RoleRead, "/v1/user/add": RoleAdmin, "/v1/user/set-addresses": RoleAdmin,
		"/v1/user/add-address": RoleAdmin, "/v1/user/remove-address": RoleAdmin, "/v1/user/remove": RoleAdmin, "/v1/user/move": RoleAdmin,
		"/v1/nodes": RoleRead, "/v1/node/add": RoleAdmin, "/v1/node/remove": RoleAdmin,
	} {
		if r, ok := s.routes[path]; !ok || r.need != want {
			t.Errorf("%s: role %v (route %v), want %v", path, r.need, ok, want)
		}
	}
}
