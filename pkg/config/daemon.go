package config

import (
	"fmt"
	"log/slog"
	"net"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/shaperd/shaperd/pkg/tbf"
)

// Defaults of the [daemon] and [policy] tables.
const (
	DefaultSocket            = "/run/shaperd/shaperd.sock"
	DefaultStateDir          = "/var/lib/shaperd"
	DefaultUsersFile         = "users.toml"
	DefaultReconcileInterval = 5 * time.Second
	// DefaultFullReconcileInterval is daemon.full_reconcile_interval's default.
	DefaultFullReconcileInterval = 5 * time.Minute
	DefaultPolicyInterval        = 1 * time.Second
	DefaultRamp                  = 2 * time.Second
	DefaultSmoothWindow          = 1 * time.Second
	// DefaultQuotaInterval is policy.quota_interval's default.
	DefaultQuotaInterval = 1 * time.Second
	// DefaultMaxReloadRemovals is daemon.max_reload_removals' default, in
	// percent of the users in force.
	DefaultMaxReloadRemovals = 50
	// MinMemoryLimit is the smallest daemon.memory_limit other than 0: below
	// it the Go runtime would collect continuously.
	MinMemoryLimit = 32 * tbf.Mebibyte
)

// MaxSocketPath is the longest unix socket path: sockaddr_un's sun_path
// holds 108 bytes with the terminating NUL.
const MaxSocketPath = 107

var logLevels = map[string]slog.Level{
	"debug": slog.LevelDebug, "info": slog.LevelInfo, "warn": slog.LevelWarn, "error": slog.LevelError,
}

// decodeDaemon reads [daemon].
func decodeDaemon(rt *table) Daemon {
	d := Daemon{
		Socket:                DefaultSocket,
		StateDir:              DefaultStateDir,
		ReconcileInterval:     DefaultReconcileInterval,
		FullReconcileInterval: DefaultFullReconcileInterval,
		UsersFile:             DefaultUsersFile,
		LogLevel:              slog.LevelInfo,
		MaxReloadRemovals:     DefaultMaxReloadRemovals,
	}
	t, ok := rt.sub("daemon")
	if !ok {
		return d
	}
	if s, ok := t.str("socket"); ok {
		switch {
		case !filepath.IsAbs(s):
			t.errf("socket", "%q is not an absolute path", s)
		case len(s) > MaxSocketPath:
			t.errf("socket", "path of %d bytes is too long for a unix socket (at most %d)", len(s), MaxSocketPath)
		default:
			d.Socket = s
		}
	}
	if s, ok := t.str("socket_group"); ok {
		if s == "" {
			t.errf("socket_group", "group name is empty (leave the key out for root only)")
		} else if err := checkGroup(s); err != nil {
			t.errf("socket_group", "%v", err)
		}
		d.SocketGroup = s
	}
	if s, ok := t.str("admin_group"); ok {
		if s == "" {
			t.errf("admin_group", "group name is empty (leave the key out: only root may change)")
		} else if err := checkGroup(s); err != nil {
			t.errf("admin_group", "%v", err)
		}
		d.AdminGroup = s
	}
	if s, ok := t.str("state_dir"); ok {
		if filepath.IsAbs(s) {
			d.StateDir = s
		} else {
			t.errf("state_dir", "%q is not an absolute path", s)
		}
	}
	if s, ok := t.str("metrics"); ok {
		if s != "" {
			if _, port, err := net.SplitHostPort(s); err != nil {
				t.errf("metrics", "%q is not host:port (or \"\" for off): %v", s, err)
			} else if n, err := strconv.ParseUint(port, 10, 16); err != nil || n == 0 {
				t.errf("metrics", "%q: port %q is not a number from 1 to 65535", s, port)
			}
		}
		d.Metrics = s
	}
	if m, ok := t.userMetrics("metrics_per_user"); ok {
		d.MetricsPerUser = m
	}
	if v, ok := t.duration("reconcile_interval", 100*time.Millisecond); ok {
		d.ReconcileInterval = v
	}
	if v, ok := t.duration("full_reconcile_interval", 100*time.Millisecond); ok {
		d.FullReconcileInterval = v
	}
	if s, ok := t.str("users_file"); ok {
		if s == "" {
			t.errf("users_file", "file name is empty")
		} else {
			d.UsersFile = s
		}
	}
	if s, ok := t.enum("log_level", "debug", "info", "warn", "error"); ok {
		d.LogLevel = logLevels[s]
	}
	if s, ok := t.typed("max_reload_removals", `a share of the users such as "50%"`); ok {
		if p, err := parsePercent(s); err != nil {
			t.errf("max_reload_removals", "%v", err)
		} else {
			d.MaxReloadRemovals = p
		}
	}
	if v, ok := t.size("memory_limit"); ok {
		if v != 0 && v < MinMemoryLimit {
			t.errf("memory_limit", "%s is below the smallest limit, %s (\"0\" for none)", v, MinMemoryLimit)
		} else {
			d.MemoryLimit = v
		}
	}
	t.finish()
	return d
}

// decodePolicy reads [policy].
func decodePolicy(rt *table) Policy {
	p := Policy{
		Interval:      DefaultPolicyInterval,
		Ramp:          DefaultRamp,
		SmoothWindow:  DefaultSmoothWindow,
		QuotaInterval: DefaultQuotaInterval,
		Location:      time.Local,
	}
	t, ok := rt.sub("policy")
	if !ok {
		return p
	}
	if v, ok := t.duration("interval", 10*time.Millisecond); ok {
		p.Interval = v
	}
	if v, ok := t.duration("ramp", 0); ok {
		p.Ramp = v
	}
	if v, ok := t.duration("smooth_window", 0); ok {
		p.SmoothWindow = v
	}
	if v, ok := t.duration("quota_interval", 10*time.Millisecond); ok {
		p.QuotaInterval = v
	}
	if s, ok := t.str("timezone"); ok {
		switch s {
		case "local", "Local":
			p.Location = time.Local
		case "":
			t.errf("timezone", "time zone is empty (use \"local\", \"UTC\" or an IANA name such as \"Europe/Berlin\")")
		default:
			loc, err := time.LoadLocation(s)
			if err != nil {
				t.errf("timezone", "unknown time zone %q (use \"local\", \"UTC\" or an IANA name such as \"Europe/Berlin\")", s)
			} else {
				p.Location = loc
			}
		}
	}
	t.finish()
	return p
}

// checkGroup checks that a group named in [daemon] exists on this system
// (a name in the group database, or a numeric gid), as the daemon needs it
// at start.
func checkGroup(name string) error {
	if _, err := strconv.ParseUint(name, 10, 32); err == nil {
		return nil
	}
	if _, err := user.LookupGroup(name); err != nil {
		return fmt.Errorf("group %q does not exist on this system (create it with groupadd, or use another group)", name)
	}
	return nil
}

// parsePercent reads a whole percentage from 0% to 100%, e.g. "50%".
func parsePercent(s string) (int, error) {
	num, ok := strings.CutSuffix(strings.TrimSpace(s), "%")
	n, err := strconv.Atoi(strings.TrimSpace(num))
	if !ok || err != nil {
		return 0, fmt.Errorf("%q is not a percentage such as \"50%%\"", s)
	}
	if n < 0 || n > 100 {
		return 0, fmt.Errorf("%q is out of range: from 0%% to 100%%", s)
	}
	return n, nil
}

// minGuardedRemovals is how many users a reload may always remove, whatever
// max_reload_removals says, unless it removes every user.
const minGuardedRemovals = 2

// ReloadRemovalsRefused reports whether a reload that removes removed of the
// inForce users needs a confirmation under daemon.max_reload_removals
// maxPercent: it removes more than maxPercent of them (and more than two),
// or every one of them. With maxPercent 100 it never does.
func ReloadRemovalsRefused(inForce, removed, maxPercent int) bool {
	if maxPercent >= 100 || removed == 0 {
		return false
	}
	if removed >= inForce {
		return true
	}
	return removed > minGuardedRemovals && removed*100 > inForce*maxPercent
}
