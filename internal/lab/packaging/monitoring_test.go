package packaging

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/shaperd/shaperd/internal/lab/netnslab"
)

const (
	dashboardFile = "contrib/grafana/shaperd.json"
	alertsFile    = "contrib/prometheus/alerts.yml"
	alertsTests   = "contrib/prometheus/alerts_test.yml"
)

// dashboard is the part of a Grafana dashboard the tests read.
type dashboard struct {
	UID        string `json:"uid"`
	Templating struct {
		List []struct {
			Name string `json:"name"`
		} `json:"list"`
	} `json:"templating"`
	Panels []panel `json:"panels"`
}

type panel struct {
	ID      int    `json:"id"`
	Type    string `json:"type"`
	Title   string `json:"title"`
	GridPos struct {
		H, W, X, Y int
	} `json:"gridPos"`
	Targets []struct {
		RefID string `json:"refId"`
		Expr  string `json:"expr"`
	} `json:"targets"`
	Panels []panel `json:"panels"`
}

func readDashboard(t *testing.T) dashboard {
	t.Helper()
	var d dashboard
	if err := json.Unmarshal([]byte(readFile(t, filepath.Join(repoRoot(t), dashboardFile))), &d); err != nil {
		t.Fatalf("%s: %v", dashboardFile, err)
	}
	return d
}

// dashboardExprs returns every query of the dashboard by panel title.
func dashboardExprs(d dashboard) map[string][]string {
	out := map[string][]string{}
	var walk func([]panel)
	walk = func(ps []panel) {
		for _, p := range ps {
			for _, tg := range p.Targets {
				out[p.Title] = append(out[p.Title], tg.Expr)
			}
			walk(p.Panels)
		}
	}
	walk(d.Panels)
	return out
}

// TestDashboardIsWellFormed checks the dashboard's structure: unique
// panel ids, panels inside the 24-column grid, a query in every target,
// and only variables the dashboard defines (or Grafana's own).
func TestDashboardIsWellFormed(t *testing.T) {
	d := readDashboard(t)
	if d.UID == "" {
		t.Error("no uid: imports would duplicate the dashboard")
	}
	vars := map[string]bool{"__rate_interval": true, "__interval": true, "__range": true}
	for _, v := range d.Templating.List {
		vars[v.Name] = true
	}
	ids := map[int]string{}
	for _, p := range d.Panels {
		if other, dup := ids[p.ID]; dup {
			t.Errorf("panels %q and %q share id %d", p.Title, other, p.ID)
		}
		ids[p.ID] = p.Title
		if p.GridPos.X < 0 || p.GridPos.W <= 0 || p.GridPos.X+p.GridPos.W > 24 || p.GridPos.H <= 0 {
			t.Errorf("panel %q: gridPos %+v outside the 24-column grid", p.Title, p.GridPos)
		}
		if p.Type != "row" && len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		refs := map[string]bool{}
		for _, tg := range p.Targets {
			if strings.TrimSpace(tg.Expr) == "" || refs[tg.RefID] {
				t.Errorf("panel %q: empty query or duplicate refId %q", p.Title, tg.RefID)
			}
			refs[tg.RefID] = true
			for _, m := range regexp.MustCompile(`\$(\w+)`).FindAllStringSubmatch(tg.Expr, -1) {
				if !vars[m[1]] {
					t.Errorf("panel %q uses undefined variable $%s", p.Title, m[1])
				}
			}
		}
	}
	exprs := dashboardExprs(d)
	for _, want := range []string{"shaperd_class_ceil_bytes_per_second", "shaperd_tier_bytes_total", "shaperd_node_bytes_total", "topk(", "shaperd_reconcile_duration_seconds_bucket", "shaperd_kernel_writes_total", "shaperd_errors_total"} {
		found := false
		for _, es := range exprs {
			for _, e := range es {
				found = found || strings.Contains(e, want)
			}
		}
		if !found {
			t.Errorf("the dashboard has no query with %s", want)
		}
	}
}

// TestAlertRules checks alerts.yml with promtool check rules and its unit
// tests (alerts_test.yml: each alert fires, or stays quiet, on series
// written for it) with promtool test rules.
func TestAlertRules(t *testing.T) {
	if _, err := exec.LookPath("promtool"); err != nil {
		need(t, "promtool is not installed (apt-get install prometheus)")
	}
	root := repoRoot(t)
	run(t, root, "promtool", "check", "rules", alertsFile)
	run(t, root, "promtool", "test", "rules", alertsTests)
}

// monitoringConfig runs shaperd in the namespace on lan0 (a veth), both
// directions, with a tier that has a quota and a node with alice behind
// it; %[1]s is the test directory.
const monitoringConfig = `
[daemon]
socket = "%[1]s/shaperd.sock"
state_dir = "%[1]s/state"
metrics = "127.0.0.1:9717"
reconcile_interval = "200ms"

[policy]
interval = "200ms"
timezone = "UTC"

[[interface]]
name = "lan0"
bandwidth = "1gbit"
default_tier = "bronze"

[[interface]]
name = "lan0"
direction = "ingress"
bandwidth = "100mbit"
default_tier = "bronze"

[tiers.bronze]
rate = "5mbit"
ceil = "20mbit"
aggregate_rate = "50mbit"

[tiers.gold]
rate = "50mbit"
ceil = "100mbit"
quota = "100gb"
over_quota_rate = "1mbit"

[nodes.ap-1]
rate = "200mbit"
upload_rate = "50mbit"
`

const monitoringUsers = `
[[user]]
name = "alice"
tier = "gold"
node = "ap-1"
addresses = ["198.18.1.10"]

[[user]]
name = "bob"
tier = "bronze"
addresses = ["198.18.1.20"]
`

// TestMetricsOfARunningDaemon starts the built shaperd as the unit starts
// it (ip netns exec, the unit's ExecStartPre/ExecStart lines) in a lab
// namespace, scrapes /metrics from inside the namespace, lints the scrape
// with promtool check metrics, and checks that every metric the dashboard
// and the alerts query is in the scrape, with the labels they select on.
func TestMetricsOfARunningDaemon(t *testing.T) {
	netnslab.Require(t)
	if _, err := exec.LookPath("promtool"); err != nil {
		need(t, "promtool is not installed (apt-get install prometheus)")
	}
	root := repoRoot(t)
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	const version = "0.0~test.monitoring"
	bin := filepath.Join(dir, "shaperd")
	run(t, root, "go", "build", "-ldflags", "-X main.version="+version, "-o", bin, "./cmd/shaperd")
	cfg := filepath.Join(dir, "shaperd.toml")
	if err := os.WriteFile(cfg, []byte(fmt.Sprintf(monitoringConfig, dir)), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "users.toml"), []byte(monitoringUsers), 0o644); err != nil {
		t.Fatal(err)
	}
	ns := netnslab.NewNS(t, "mon")
	ns.MustRun("ip", "link", "add", "lan0", "type", "veth", "peer", "name", "lan0-peer")
	ns.MustRun("ip", "link", "set", "lan0", "up")
	ns.MustRun("ip", "link", "set", "lan0-peer", "up")
	unit, err := netnslab.ReadUnit(filepath.Join(root, "systemd/shaperd.service"))
	if err != nil {
		t.Fatal(err)
	}
	svc := netnslab.StartService(t, ns, unit, map[string]string{
		"/usr/local/bin/shaperd":    bin,
		"/etc/shaperd/shaperd.toml": cfg,
	})
	svc.WaitReady(30 * time.Second)
	t.Cleanup(func() {
		if svc.Running() {
			_ = svc.Stop()
		}
		_ = exec.Command(bin, "--config", cfg, "--netns", ns.Name, "--teardown").Run()
	})

	// Wait for a dump after the apply: the counters and tier sums are there.
	var scrape string
	for start := time.Now(); ; time.Sleep(100 * time.Millisecond) {
		scrape = get(t, ns, "http://127.0.0.1:9717/metrics")
		if strings.Contains(scrape, "shaperd_class_bytes_total{") && strings.Contains(scrape, "shaperd_tier_bytes_total{") && strings.Contains(scrape, "shaperd_node_bytes_total{") {
			break
		}
		if time.Since(start) > 15*time.Second {
			t.Fatalf("no class counters in the scrape after 15s:\n%s\n%s", scrape, svc.Logs.String())
		}
	}

	lint := exec.Command("promtool", "check", "metrics")
	lint.Stdin = strings.NewReader(scrape)
	if out, err := lint.CombinedOutput(); err != nil {
		t.Errorf("promtool check metrics: %v\n%s", err, out)
	}
	series := parseScrape(t, scrape)
	if want := fmt.Sprintf(`shaperd_build_info{goversion=%q,version=%q} 1`, goVersionLabel(t, scrape), version); !strings.Contains(scrape, want) {
		t.Errorf("scrape lacks %s", want)
	}

	queries := map[string][]string{}
	for title, es := range dashboardExprs(readDashboard(t)) {
		queries[dashboardFile+": "+title] = es
	}
	for name, expr := range alertExprs(t, filepath.Join(root, alertsFile)) {
		queries[alertsFile+": "+name] = []string{expr}
	}
	// Labels Prometheus adds to every series of a target, and its own up.
	targetLabels := map[string]bool{"instance": true, "job": true}
	used := map[string]bool{}
	for _, where := range slices.Sorted(maps.Keys(queries)) {
		for _, e := range queries[where] {
			// Labels of by (...), on (...) and the like must be on a
			// metric of the expression (le: on histogram buckets).
			have := maps.Clone(targetLabels)
			for _, m := range metricRef.FindAllStringSubmatch(e, -1) {
				maps.Copy(have, series[m[1]])
			}
			for _, g := range groupRef.FindAllStringSubmatch(e, -1) {
				for _, l := range strings.Split(g[1], ",") {
					if l = strings.TrimSpace(l); l != "" && !have[l] {
						t.Errorf("%s: %q groups or matches by %s, which none of its metrics has", where, e, l)
					}
				}
			}
			for _, m := range metricRef.FindAllStringSubmatch(e, -1) {
				name := m[1]
				used[name] = true
				labels, ok := series[name]
				if !ok {
					t.Errorf("%s: %s is not in a scrape of shaperd", where, name)
					continue
				}
				for _, l := range labelRef.FindAllStringSubmatch(m[2], -1) {
					if !labels[l[1]] && !targetLabels[l[1]] {
						t.Errorf("%s: %s has no label %s (it has %v)", where, name, l[1], slices.Sorted(maps.Keys(labels)))
					}
				}
			}
		}
	}
	if len(used) < 10 {
		t.Errorf("only %d metrics found in the queries: %v", len(used), used)
	}
	if t.Failed() {
		t.Logf("scrape:\n%s", scrape)
	}
}

var (
	// metricRef is a shaperd metric in a query with its label selector.
	metricRef = regexp.MustCompile(`\b(shaperd_[a-z0-9_]+)(\{[^}]*\})?`)
	// groupRef is the label list of by, without, on, ignoring, group_left
	// or group_right.
	groupRef = regexp.MustCompile(`\b(?:by|without|on|ignoring|group_left|group_right)\s*\(([^)]*)\)`)
	// labelRef is a label matcher in a selector.
	labelRef = regexp.MustCompile(`(\w+)\s*(?:=~|!~|!=|=)`)
)

// parseScrape returns the series names of a text-format scrape (with
// _bucket, _sum, _count for histograms) and their label names.
func parseScrape(t *testing.T, scrape string) map[string]map[string]bool {
	t.Helper()
	out := map[string]map[string]bool{}
	for _, line := range strings.Split(scrape, "\n") {
		if line == "" || line[0] == '#' {
			continue
		}
		name, _, _ := strings.Cut(line, " ")
		var labels string
		if i := strings.IndexByte(line, '{'); i >= 0 && i < len(name)+1 {
			name = line[:i]
			rest := line[i:]
			labels = rest[:strings.IndexByte(rest, '}')+1]
		}
		if out[name] == nil {
			out[name] = map[string]bool{}
		}
		for _, l := range regexp.MustCompile(`(\w+)="`).FindAllStringSubmatch(labels, -1) {
			out[name][l[1]] = true
		}
	}
	return out
}

// goVersionLabel is the goversion label of shaperd_build_info in scrape.
func goVersionLabel(t *testing.T, scrape string) string {
	t.Helper()
	m := regexp.MustCompile(`shaperd_build_info\{goversion="([^"]+)"`).FindStringSubmatch(scrape)
	if m == nil {
		t.Fatalf("no shaperd_build_info in the scrape")
	}
	return m[1]
}

// alertExprs returns each alert's expr: read line by line (a single line
// or a | block), as alerts.yml writes them; TestAlertRules has validated
// the file with promtool.
func alertExprs(t *testing.T, path string) map[string]string {
	t.Helper()
	out := map[string]string{}
	name := ""
	lines := strings.Split(readFile(t, path), "\n")
	for i := 0; i < len(lines); i++ {
		l := strings.TrimSpace(lines[i])
		switch {
		case strings.HasPrefix(l, "- alert: "):
			name = strings.TrimPrefix(l, "- alert: ")
		case strings.HasPrefix(l, "expr: "):
			e := strings.TrimPrefix(l, "expr: ")
			if e == "|" {
				e = ""
				indent := len(lines[i+1]) - len(strings.TrimLeft(lines[i+1], " "))
				for i+1 < len(lines) && len(lines[i+1]) > indent && len(lines[i+1])-len(strings.TrimLeft(lines[i+1], " ")) >= indent {
					i++
					e += strings.TrimSpace(lines[i]) + " "
				}
			}
			out[name] = e
		}
	}
	if len(out) == 0 {
		t.Fatalf("%s: no alerts found", path)
	}
	return out
}

// get fetches url from inside ns.
func get(t *testing.T, ns *netnslab.NS, url string) string {
	t.Helper()
	resp, err := ns.HTTPClient().Get(url)
	if err != nil {
		t.Fatalf("GET %s in %s: %v", url, ns.Name, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("GET %s: %s %v", url, resp.Status, err)
	}
	return string(b)
}
