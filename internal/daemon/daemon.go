package daemon

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strings"
	"sync/atomic"
	"time"

	"github.com/shaperd/shaperd/internal/check/offline"
	"github.com/shaperd/shaperd/internal/control"
	"github.com/shaperd/shaperd/internal/statefile"
	"github.com/shaperd/shaperd/pkg/config"
	"github.com/shaperd/shaperd/pkg/kernel"
	"github.com/shaperd/shaperd/pkg/model"
	"github.com/shaperd/shaperd/pkg/policy"
)

// DefaultLockDir holds the interface locks: the unit's RuntimeDirectory.
const DefaultLockDir = "/run/shaperd"

// ErrLocked is wrapped by New's error when another shaperd process manages
// one of the configured interfaces (statefile.ErrLocked).
var ErrLocked = statefile.ErrLocked

// DefaultLinkSettle is how long the daemon waits after a link event for
// more events before it reconciles the interface.
const DefaultLinkSettle = 100 * time.Millisecond

// Options configure a Daemon. Only ConfigPath is required.
type Options struct {
	// ConfigPath is the main configuration file (shaperd.toml).
	ConfigPath string
	// NetNS names the network namespace to shape in (as `ip netns` knows
	// it); "" is the daemon's own. Used when Kernel is nil.
	NetNS string
	// Kernel is the kernel to shape; nil opens the real one in NetNS.
	// The daemon closes it in Close.
	Kernel Kernel
	// Clock is the source of time; nil is RealClock.
	Clock Clock
	// Logger receives the logs; nil discards them.
	Logger *slog.Logger
	// Version is the daemon's version (shaperd --version), shown by the
	// shaperd_build_info metric; "" is "devel".
	Version string
	// LogLevel, when set, is given daemon.log_level of every loaded plan.
	LogLevel *slog.LevelVar
	// Notifier receives sd_notify states; nil sends none.
	Notifier Notifier
	// Watchdog is the service manager's watchdog interval (see
	// SystemdWatchdog); the loop pings at half of it. 0: no pings.
	Watchdog time.Duration
	// ControlListener serves the control API; nil: Run listens on
	// daemon.socket (with daemon.socket_group) itself.
	ControlListener net.Listener
	// MetricsListener serves /metrics; nil: Run listens on daemon.metrics
	// when that is set.
	MetricsListener net.Listener
	// ReturnMemory collects the garbage and returns freed memory to the
	// OS after the first apply and after every reconcile tick (see
	// returnMemory); for the daemon process (cmd/shaperd), not for tests.
	ReturnMemory bool
	// LinkSettle is the wait after a link event before reconciling; 0 is
	// DefaultLinkSettle.
	LinkSettle time.Duration
	// LockDir holds the per-interface locks taken when the daemon opens
	// the real kernel (Kernel nil); "" is DefaultLockDir.
	LockDir string
	// Force goes on when another shaperd holds an interface's lock (with
	// a warning) instead of failing.
	Force bool
	// ReadOnly makes a Daemon that only looks (PlanDiff): it takes no
	// interface locks and leaves unreadable state files where they are. Run,
	// Once and Teardown must not be called on it.
	ReadOnly bool
	// Takeover lets shaperd replace root qdiscs of other tools on every
	// managed interface (shaperd --takeover), as takeover = true on each
	// interface does; each takeover is logged and counted.
	Takeover bool
}

// Daemon is a configured shaperd. Create it with New, then call Run (the
// daemon), Once (apply and verify once) or Teardown, and finally Close.
// Its control.Service methods may be called from any goroutine while Run
// runs: they are run by the loop (call), which owns all the state below
// but the last group.
type Daemon struct {
	// Set by New.
	opts   Options
	log    *slog.Logger
	clock  Clock
	notify Notifier
	k      Kernel
	locks  *statefile.Locks
	// classifiers is the classifier chosen per interface key, for the
	// log (setClassifier).
	classifiers map[string]string

	// plan is the plan in force; ifaces has one reconciler per managed
	// interface (reconciler.go).
	plan   *config.Plan
	ifaces []*reconciler
	// The policy's state: overrides, usage, ramps, the last evaluation.
	policyState
	// The service manager's view: readiness, watchdog, STATUS=.
	serviceState
	// The state files in state_dir (state_files.go).
	stateFileState
	// The run-time users (service_users.go).
	runtimeUsers
	// lastReload is the last reload's result; nil before the first.
	lastReload *control.ReloadStatus
	// fleet is fleet mode's state; nil without [fleet] (fleet.go).
	fleet *fleetState
	// events are the kernel's link and traffic-control events (loop_events.go).
	events eventState

	// reqs are the control requests for the loop (call); reads are the
	// ones that only read (status, top: callRead), which a long apply also
	// serves between its runs (applyProgress), when applying is set;
	// stopped is closed when the loop is gone; looping: the loop runs.
	reqs     chan func()
	reads    chan func()
	applying bool
	stopped  chan struct{}
	looping  atomic.Bool

	// Read by the metrics collectors on other goroutines (metrics*.go):
	// counters and copies the loop publishes.
	stats daemonStats
	quota *quotaStats
	snap  atomic.Pointer[[]*ifaceSnapshot]
	// quotaSnap is every quota user's usage at the last evaluation, for
	// the metrics (publishQuota).
	quotaSnap atomic.Pointer[[]quotaSample]
	// returning: a returnMemory collection runs beside the loop.
	returning atomic.Bool
	// startGOGC is the GOGC before startGC set StartGCPercent (startGCSet)
	// for the start; the first apply restores it.
	startGOGC  int
	startGCSet bool
}

// policyState is the loop's policy state.
type policyState struct {
	overrides policy.Overrides
	usage     *policy.Usage
	ramper    *policy.Ramper
	// policyDirty makes the next policy tick evaluate the policy;
	// nextPolicy is when the evaluation may change by itself
	// (policy.NextChange); lastRes is the last evaluation.
	policyDirty bool
	nextPolicy  time.Time
	lastEval    time.Time
	lastRes     *policy.Result
	// userIdx is each user's index in plan.Users.
	userIdx map[string]int
	// quotas: some tier has a quota, so new usage can change the policy.
	quotas bool
	// counterReads counts the counter reads (dumps) since the last
	// reconcile tick, which then returns their garbage (returnMemory).
	counterReads int
	// work counts the policy ticks' work.
	work workCounters
}

// serviceState is what the loop told the service manager, and whether
// traffic-control events arrive.
type serviceState struct {
	// ready: READY=1 was sent (after the first pass, afterReconcile).
	ready bool
	// lastPing is when WATCHDOG=1 was last sent; lastExtend when the
	// start-up timeout was last extended (see applyProgress).
	lastPing, lastExtend time.Time
	// lastStatus is the last STATUS= sent (see serviceStatus).
	lastStatus string
	// tcLive: traffic-control events arrive (WatchTC), so ticks may read
	// counters only (see tick).
	tcLive bool
}

// stateFileState is what the loop knows of the state files.
type stateFileState struct {
	// loadedIDs are the assignments read from the state file, by
	// interface key, until makeReconcilers takes them; savedIDs is the
	// file's contents as last written or read.
	loadedIDs map[string]*model.Assignment
	savedIDs  []byte
	// problems are the state file problems by "FILE/KIND" (state_files.go);
	// overridesUnsaved: the overrides in force differ from the state file.
	problems         map[string]*control.StateProblem
	overridesUnsaved bool
	// assignmentsDue: a run-time user change gave out class ids that a
	// reconcile tick saves (retryState), at most every assignmentsEvery
	// (assignmentsAt: the last save): marshalling 10,000 users' ids takes
	// the loop about 6 ms, too much for each change or each tick while
	// users come and go, and ids lost in a crash are recovered from the
	// kernel's classes by address. Shutdown saves them too.
	assignmentsDue bool
	assignmentsAt  time.Time
}

// runtimeUsers are the users added at run time (service_users.go).
type runtimeUsers struct {
	// filePlan is the plan the files give, with the run-time nodes;
	// Daemon.plan is filePlan with the run-time users added. rtExpiry is when the next run-time
	// address ends (zero: none).
	filePlan *config.Plan
	runtime  []runtimeUser
	// rtNodes are the nodes added at run time (service_nodes.go), in the
	// order of addition; filePlan has them.
	rtNodes  []runtimeNode
	rtExpiry time.Time
	// journal is users.json's journal of changes (state_journal.go);
	// rtIndex indexes runtime by name and prefixes the addresses of
	// prefixesOf's users (service_users.go): both are kept up to date by
	// a run-time user change, rebuilt when stale.
	journal    usersJournal
	rtIndex    map[string]int
	rtIndexOf  *runtimeUser // runtime's array when rtIndex was built
	prefixes   *config.PrefixIndex
	prefixesOf *config.Plan
	userPhases userPhases // of the last change, for benchmarks
}

var _ control.Service = (*Daemon)(nil)

// ConfigError is returned by New and Reload when the configuration is
// invalid; Problems are "FILE:LINE:COL: KEY: MSG" lines.
type ConfigError = control.ValidationError

// New loads and validates the configuration, connects to the kernel and
// loads the state (overrides, quota usage, class assignments) from
// daemon.state_dir. An invalid configuration is a *ConfigError. New writes
// nothing to the kernel.
func New(opts Options) (*Daemon, error) {
	d := &Daemon{
		opts:    opts,
		log:     opts.Logger,
		clock:   opts.Clock,
		notify:  opts.Notifier,
		reqs:    make(chan func()),
		reads:   make(chan func()),
		stopped: make(chan struct{}),
	}
	if d.log == nil {
		d.log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if d.clock == nil {
		d.clock = RealClock{}
	}
	if d.notify == nil {
		d.notify = noNotifier{}
	}
	if d.opts.LinkSettle <= 0 {
		d.opts.LinkSettle = DefaultLinkSettle
	}
	d.stats.init()
	d.quota = newQuotaStats()
	d.startGC()
	plan, err := d.initialShared(opts.ConfigPath)
	if err != nil {
		d.closeFleet()
		return nil, err
	}
	d.setLogLevel(plan)
	d.k = opts.Kernel
	if d.k == nil {
		if !opts.ReadOnly {
			if err := d.lock(plan); err != nil {
				return nil, err
			}
		}
		k, err := kernel.Open(kernel.Options{NetNS: opts.NetNS, Progress: d.applyProgress})
		if err != nil {
			d.locks.Release()
			return nil, fmt.Errorf("open kernel (netns %q): %w", opts.NetNS, err)
		}
		d.k = k
	}
	if err := d.loadState(plan); err != nil {
		d.Close()
		return nil, err
	}
	d.resolveLeaves(plan)
	if err := d.checkClassifiers(plan); err != nil {
		d.Close()
		return nil, err
	}
	plan = d.startNodes(plan)
	d.filePlan = plan
	plan = d.startRuntime(plan)
	// Pruned once the run-time nodes and users are in: their overrides
	// are kept.
	for _, o := range d.overrides.Prune(plan) {
		d.log.Warn("dropping override of a target the configuration no longer has", "target", o.Target.String())
	}
	d.setPlan(plan)
	d.ramper = policy.NewRamper(rampPolicy(plan.Policy))
	d.ifaces = d.makeReconcilers(plan, nil)
	d.seedRamper()
	d.log.Info("configuration loaded", "config", plan.Path, "interfaces", len(plan.Interfaces),
		"tiers", len(plan.Tiers), "users", len(plan.Users), "overrides", d.overrides.Len())
	return d, nil
}

// Close releases the kernel connection and the interface locks. The
// shaping stays in place.
func (d *Daemon) Close() error {
	d.closeFleet()
	d.locks.Release()
	return d.k.Close()
}

// lock takes the locks of plan's devices (see statefile.Locks); with
// Options.Force a lock held elsewhere is logged and passed over.
func (d *Daemon) lock(plan *config.Plan) error {
	var devs []string
	for _, in := range plan.Interfaces {
		devs = append(devs, in.Name)
		if in.Direction == config.Ingress {
			devs = append(devs, in.IFB)
		}
	}
	dir := d.opts.LockDir
	if dir == "" {
		dir = DefaultLockDir
	}
	l, err := statefile.LockInterfaces(dir, d.opts.NetNS, devs)
	if err != nil && d.opts.Force && errors.Is(err, ErrLocked) {
		d.log.Warn("--force: going on although another shaperd manages an interface", "err", err)
		return nil
	}
	d.locks = l
	return err
}

// setPlan makes plan the one in force and marks the policy for a new
// evaluation.
func (d *Daemon) setPlan(plan *config.Plan) {
	d.plan = plan
	d.setMemoryLimit(plan.Daemon.MemoryLimit)
	d.userIdx = make(map[string]int, len(plan.Users))
	for i, u := range plan.Users {
		d.userIdx[u.Name] = i
	}
	d.policyDirty = true
	d.quotas = false
	for _, t := range plan.Tiers {
		if t.Quota != 0 {
			d.quotas = true
		}
	}
	for i := range plan.Users {
		if plan.Users[i].Quota != 0 { // a user's own quota
			d.quotas = true
		}
	}
}

// loadPlan loads path (with the fleet's shared documents sh, when not
// nil: config.LoadShared) and checks the plan offline (offline.Plan), turning
// the problems into a *ConfigError (at most config.MaxPrinted of them, then
// a line saying how many more).
func loadPlan(path string, sh *config.Shared) (*config.Plan, error) {
	var plan *config.Plan
	var err error
	if sh != nil {
		plan, err = config.LoadShared(path, sh)
	} else {
		plan, err = config.Load(path)
	}
	if err == nil {
		if errs := offline.Plan(plan); len(errs) > 0 {
			return nil, &ConfigError{Problems: config.FormatErrors(errs, config.MaxPrinted)}
		}
		return plan, nil
	}
	var ce *config.Errors
	if errors.As(err, &ce) {
		return nil, &ConfigError{Problems: config.FormatErrors(ce.List, config.MaxPrinted)}
	}
	return nil, &ConfigError{Problems: []string{err.Error()}}
}

func (d *Daemon) setLogLevel(plan *config.Plan) {
	if d.opts.LogLevel != nil {
		d.opts.LogLevel.Set(plan.Daemon.LogLevel)
	}
}

// loadState reads overrides, usage and assignments for plan from its
// state_dir. Overrides of targets plan no longer has are dropped. A state
// file that cannot be read or parsed never stops the daemon: it is moved
// aside, counted and shown in status (readStateFile), and the daemon goes
// on without it:
//   - overrides: none are in force (the moved file keeps them for the
//     operator to re-issue);
//   - class ids: recovered from the kernel's classes by address
//     (recoverAssignment), so users keep their classes and counters;
//   - quota usage: rebuilt from the kernel's class byte counters
//     (policy.Usage.Rebuild): each user's bytes since their classes were
//     created count, which is exact for classes created in the current
//     period and too much for older ones; bytes of classes deleted or
//     re-created since (a reboot, a teardown) cannot be recovered. A
//     missing usage file (state_dir wiped) is rebuilt the same way.
func (d *Daemon) loadState(plan *config.Plan) error {
	dir := plan.Daemon.StateDir
	d.problems = map[string]*control.StateProblem{}
	d.readStateFile(dir, OverridesFile, "no overrides are in force (re-issue them with set-rate; the moved file keeps the old ones)",
		func(b []byte) error {
			ov, err := decodeOverrides(b)
			if err == nil {
				d.overrides = ov
			}
			return err
		})
	d.usage = nil
	d.readStateFile(dir, UsageFile, "quota usage rebuilt from the kernel's class byte counters: bytes since each class's creation count, bytes of re-created classes are lost",
		func(b []byte) error {
			u, err := decodeUsage(b, plan.Policy.Location)
			if err == nil {
				d.usage = u
			}
			return err
		})
	if d.usage == nil {
		d.usage = policy.NewUsage(plan.Policy.Location)
		d.usage.Rebuild()
	}
	d.usage.Configure(plan)
	d.loadedIDs = map[string]*model.Assignment{}
	d.readStateFile(dir, AssignmentsFile, "class ids recovered from the kernel's classes by address (users keep their classes and counters)",
		func(b []byte) error {
			ids, err := decodeAssignments(b)
			if err == nil {
				d.loadedIDs = ids
			}
			return err
		})
	return nil
}

// describe joins up to n of lines for a log or error message.
func describe(lines []string, n int) string {
	if len(lines) <= n {
		return strings.Join(lines, "; ")
	}
	return strings.Join(lines[:n], "; ") + fmt.Sprintf("; and %d more", len(lines)-n)
}
