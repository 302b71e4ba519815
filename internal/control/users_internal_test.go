package control

import (
	"strings"
	"testing"
)

// The server refuses malformed user requests before the daemon sees them.
func TestUserRequestCheck(t *testing.T) {
	hour := DurationPtr(3600e9)
	for _, tc := range []struct {
		req  UserRequest
		want string
	}{
		{UserRequest{Op: "rename", Name: "a"}, "unknown user operation"},
		{UserRequest{Op: UserAdd}, "no user name"},
		{UserRequest{Op: UserAdd, Name: "a"}, "no tier"},
		{UserRequest{Op: UserAddAddress, Name: "a"}, "expected one address"},
		{UserRequest{Op: UserSetAddresses, Name: "a"}, "no addresses"},
		{UserRequest{Op: UserRemoveAddress, Name: "a", Addresses: []string{"198.18.1.1"}, For: hour}, "--for"},
		{UserRequest{Op: UserAddAddress, Name: "a", Addresses: []string{"198.18.1.1"}, For: DurationPtr(0)}, "positive"},
		{UserRequest{Op: UserAddAddress, Name: "a", Addresses: []string{"198.18.1.1"}, For: hour}, ""},
	} {
		err := tc.req.check()
		if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("%+v: %v, want %q", tc.req, err, tc.want)
		}
	}
}
