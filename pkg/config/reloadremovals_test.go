package config

import "testing"

// daemon.max_reload_removals is a whole percentage from 0% to 100%,
// default 50%.
func TestMaxReloadRemovals(t *testing.T) {
	if p := mustLoad(t, "[[interface]]\nname = \"lan0\"\nbandwidth = \"1gbit\"\n", ""); p.Daemon.MaxReloadRemovals != DefaultMaxReloadRemovals {
		t.Errorf("default %d, want %d", p.Daemon.MaxReloadRemovals, DefaultMaxReloadRemovals)
	}
	for s, want := range map[string]int{"0%": 0, "25%": 25, " 100 %": 100} {
		if got, err := parsePercent(s); err != nil || got != want {
			t.Errorf("parsePercent(%q) = %d, %v; want %d", s, got, err, want)
		}
	}
	for _, s := range []string{"50", "101%", "-1%", "0.5%", "%", "half"} {
		if got, err := parsePercent(s); err == nil {
			t.Errorf("parsePercent(%q) = %d, want an error", s, got)
		}
	}
}

// A reload needs a confirmation when it removes more than the share (and
// more than two users) or every user; with 100% never.
func TestReloadRemovalsRefused(t *testing.T) {
	for _, c := range []struct {
		inForce, removed, pct int
		want                  bool
	}{
		{850, 850, 50, true}, // users.toml emptied
		{1, 1, 50, true},     // every user, however few
		{2, 2, 50, true},
		{0, 0, 50, false},
		{6, 3, 50, false}, // half is not more than half
		{6, 4, 50, true},
		{3, 2, 50, false}, // two may always go, unless they are all
		{100, 2, 0, false},
		{100, 3, 0, true},
		{100, 10, 10, false},
		{100, 11, 10, true},
		{850, 850, 100, false},
	} {
		if got := ReloadRemovalsRefused(c.inForce, c.removed, c.pct); got != c.want {
			t.Errorf("removing %d of %d with %d%%: refused %v, want %v", c.removed, c.inForce, c.pct, got, c.want)
		}
	}
}
