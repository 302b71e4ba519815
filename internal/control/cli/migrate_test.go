package cli_test

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/shaperd/shaperd/internal/control/cli"
	"github.com/shaperd/shaperd/internal/control/controltest"
	"github.com/shaperd/shaperd/pkg/config"
)

const (
	libreqosSample = "../../migrate/testdata/ShapedDevices.csv"
	exampleConfig  = "../../../configs/shaperd.toml"
)

// checkConfig runs the checks of `shaperd --check` on main with users as
// its users file, in a fresh directory.
func checkConfig(t *testing.T, main, users string) []config.Error {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "shaperd.toml"), []byte(main), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "users.toml"), []byte(users), 0o644); err != nil {
		t.Fatal(err)
	}
	return config.Check(filepath.Join(dir, "shaperd.toml"))
}

func readFile(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestImportLibreQoSAutoTiers(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "users.toml")
	code, stdout, stderr := run(t, cli.Env{}, "import", "libreqos", libreqosSample, "-o", out)
	if code != cli.ExitOK {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if want := "wrote 5 users to " + out + " and 4 tiers to " + filepath.Join(dir, "tiers.toml"); !strings.Contains(stdout, want) {
		t.Errorf("stdout %q, want %q", stdout, want)
	}
	users, tiers := readFile(t, out), readFile(t, filepath.Join(dir, "tiers.toml"))
	for _, w := range []string{"name = \"carol\"\ntier = \"lqos-10_5-2_5\"\naddresses = [\"198.18.12.1/32\", \"198.18.12.2/32\", \"2001:db8:12::/64\"]\n",
		"# circuit 103 \"Carol\", device 1003, 1004\n"} {
		if !strings.Contains(users, w) {
			t.Errorf("users.toml lacks %q:\n%s", w, users)
		}
	}
	if !strings.Contains(tiers, "[tiers.lqos-10_5-2_5]\nrate = \"2500kbit\"\nceil = \"10500kbit\"\nupload_rate = \"500kbit\"\nupload_ceil = \"2500kbit\"\n") {
		t.Errorf("tiers.toml:\n%s", tiers)
	}
	// What shaperd --check says of the example config with the tiers added.
	if errs := checkConfig(t, readFile(t, exampleConfig)+"\n"+tiers, users); errs != nil {
		t.Errorf("shaperd --check: %v", errs)
	}
	// Again: the files exist now.
	code, _, stderr = run(t, cli.Env{}, "import", "libreqos", libreqosSample, "-o", out)
	if code != cli.ExitError || !strings.Contains(stderr, "exists; nothing written (--force replaces it)") {
		t.Errorf("second import: exit %d, %q", code, stderr)
	}
	// A missing directory: checked before the tiers file is written.
	code, _, stderr = run(t, cli.Env{}, "import", "libreqos", libreqosSample, "-o", filepath.Join(dir, "nodir", "users.toml"), "--tiers-out", filepath.Join(dir, "t2.toml"))
	if _, err := os.Stat(filepath.Join(dir, "t2.toml")); code != cli.ExitError || err == nil || !strings.Contains(stderr, "is not a directory; nothing written") {
		t.Errorf("missing directory: exit %d, %q, tiers written: %v", code, stderr, err == nil)
	}
	if code, _, stderr := run(t, cli.Env{}, "import", "libreqos", libreqosSample, "-o", out, "--force", "--json"); code != cli.ExitOK {
		t.Errorf("--force: exit %d, %s", code, stderr)
	}
}

func TestImportLibreQoSMappedTiers(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(dir, "ShapedDevices.csv")
	// The sample without its last device, which no tier of tiers.toml fits.
	lines := strings.Split(strings.TrimSpace(readFile(t, libreqosSample)), "\n")
	if err := os.WriteFile(src, []byte(strings.Join(lines[:len(lines)-1], "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "users.toml")
	code, stdout, stderr := run(t, cli.Env{}, "import", "libreqos", src, "--tiers", "../../migrate/testdata/tiers.toml", "-o", out, "--json")
	if code != cli.ExitOK {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if !strings.Contains(stdout, `"user_count": 4`) {
		t.Errorf("--json: %s", stdout)
	}
	users := readFile(t, out)
	if !strings.Contains(users, "name = \"dave\"\ntier = \"home100\"\naddresses = [\"198.18.13.1/32\"]\nrate = \"50mbit\"\nupload_rate = \"10mbit\"\n") {
		t.Errorf("users.toml:\n%s", users)
	}
	if _, err := os.Stat(filepath.Join(dir, "tiers.toml")); err == nil {
		t.Error("mapped import wrote tiers.toml")
	}
	// The full sample: its unassigned device fits no tier; nothing is written.
	out2 := filepath.Join(dir, "users2.toml")
	code, _, stderr = run(t, cli.Env{}, "import", "libreqos", libreqosSample, "--tiers", "../../migrate/testdata/tiers.toml", "-o", out2)
	if code != cli.ExitError || !strings.Contains(stderr, "ShapedDevices.csv:9: circuit device-1006: no tier") {
		t.Errorf("exit %d, %s", code, stderr)
	}
	if _, err := os.Stat(out2); err == nil {
		t.Error("a failed import wrote its users file")
	}
}

func TestImportReportsEveryBadRowAndWritesNothing(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "users.toml")
	code, stdout, stderr := run(t, cli.Env{}, "import", "libreqos", "../../migrate/testdata/ShapedDevices-bad.csv", "-o", out)
	if code != cli.ExitError || stdout != "" {
		t.Errorf("exit %d, stdout %q", code, stdout)
	}
	for _, line := range []int{3, 4, 5, 6, 7, 8, 9} {
		if w := "ShapedDevices-bad.csv:" + strconv.Itoa(line) + ": "; !strings.Contains(stderr, w) {
			t.Errorf("stderr lacks line %d:\n%s", line, stderr)
		}
	}
	if !strings.Contains(stderr, "7 problems; nothing written") {
		t.Errorf("stderr:\n%s", stderr)
	}
	code, _, stderr = run(t, cli.Env{}, "import", "csv", "../../migrate/testdata/users-bad.csv", "--config", exampleConfig, "-o", out)
	if code != cli.ExitError || !strings.Contains(stderr, "users-bad.csv:3: name \"Bob Smith\"") || !strings.Contains(stderr, "users-bad.csv:8:") {
		t.Errorf("csv: exit %d:\n%s", code, stderr)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("failed imports left %v", entries)
	}
}

func TestImportCSV(t *testing.T) {
	out := filepath.Join(t.TempDir(), "users.toml")
	code, _, stderr := run(t, cli.Env{}, "import", "csv", "../../migrate/testdata/users.csv", "--config", exampleConfig, "-o", out)
	if code != cli.ExitOK {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	users := readFile(t, out)
	if errs := checkConfig(t, readFile(t, exampleConfig), users); errs != nil {
		t.Errorf("shaperd --check: %v\n%s", errs, users)
	}
	if !strings.Contains(users, "name = \"dave\"\ntier = \"gold\"\naddresses = [\"198.18.1.30/32\"]\nrate = \"80mbit\"\nceil = \"150mbit\"\n") {
		t.Errorf("users.toml:\n%s", users)
	}
	code, _, stderr = run(t, cli.Env{}, "import", "csv", "../../migrate/testdata/users.csv", "--tiers", "auto")
	if code != cli.ExitUsage || !strings.Contains(stderr, "--tiers and --tiers-out are for import libreqos") {
		t.Errorf("csv --tiers: exit %d, %s", code, stderr)
	}
}

// exportFake is the sample daemon with addresses, and bob with his own rate.
func exportFake(t *testing.T) string {
	st := controltest.Sample()
	addrs := map[string][]string{"alice": {"198.18.1.10/32", "2001:db8:1::10/128"}, "bob": {"198.18.1.20/32"}, "carol": {"198.18.2.0/28"}}
	for i := range st.Users {
		st.Users[i].Addresses = addrs[st.Users[i].Name]
		if st.Users[i].Name == "bob" {
			st.Users[i].Rate = 25e6
		}
	}
	return controltest.Serve(t, &controltest.Fake{State: st, DefaultRamp: time.Second})
}

func TestExportRoundTrip(t *testing.T) {
	sock := exportFake(t)
	code, csvOut, stderr := run(t, cli.Env{}, "--socket", sock, "export", "--format", "csv")
	if code != cli.ExitOK {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	want := "name,tier,addresses,rate,ceil,upload_rate,upload_ceil,effective_rate,effective_ceil,effective_upload_rate,effective_upload_ceil,reason\n" +
		"alice,gold,198.18.1.10/32 2001:db8:1::10/128,,,,,50mbit,60mbit,10mbit,20mbit,schedule peak\n" +
		"bob,silver,198.18.1.20/32,25mbit,,,,3mbit,38mbit,,,override until 12:00\n"
	if !strings.HasPrefix(csvOut, want) {
		t.Errorf("csv:\n%s\nwant prefix:\n%s", csvOut, want)
	}
	// The CSV imports again, and shaperd --check accepts the result.
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "export.csv"), []byte(csvOut), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "users.toml")
	if code, _, stderr := run(t, cli.Env{}, "import", "csv", filepath.Join(dir, "export.csv"), "--config", exampleConfig, "-o", out); code != cli.ExitOK {
		t.Fatalf("import of the export: exit %d: %s", code, stderr)
	}
	if errs := checkConfig(t, readFile(t, exampleConfig), readFile(t, out)); errs != nil {
		t.Errorf("shaperd --check: %v", errs)
	}

	code, tomlOut, _ := run(t, cli.Env{}, "--socket", sock, "export")
	if code != cli.ExitOK || !strings.Contains(tomlOut, "# in force: 3mbit/38mbit down, -/- up (override until 12:00)\n[[user]]\nname = \"bob\"\ntier = \"silver\"\naddresses = [\"198.18.1.20/32\"]\nrate = \"25mbit\"\n") {
		t.Errorf("toml: exit %d\n%s", code, tomlOut)
	}
	if errs := checkConfig(t, readFile(t, exampleConfig), tomlOut); errs != nil {
		t.Errorf("shaperd --check of the TOML export: %v", errs)
	}
	code, jsonOut, _ := run(t, cli.Env{}, "--socket", sock, "export", "--json")
	if code != cli.ExitOK || !strings.Contains(jsonOut, `"user": "bob"`) || !strings.Contains(jsonOut, `"rate": 25000000`) {
		t.Errorf("json: exit %d\n%s", code, jsonOut)
	}
	if code, _, stderr := run(t, cli.Env{}, "--socket", sock, "export", "--format", "yaml"); code != cli.ExitUsage || !strings.Contains(stderr, "toml or csv") {
		t.Errorf("--format yaml: exit %d %s", code, stderr)
	}
}

// import runs the check shaperd --check runs after loading: a result that
// loads but that --check refuses (here a TBF interface of --config too slow
// for the kernel's ticks) is refused, and nothing is written.
func TestImportRunsTheCheck(t *testing.T) {
	dir := t.TempDir()
	main := filepath.Join(dir, "shaperd.toml")
	if err := os.WriteFile(main, []byte("[[interface]]\nname = \"lan0\"\nbandwidth = \"1gbit\"\n\n[[interface]]\nname = \"wan0\"\nshaper = \"tbf\"\nbandwidth = \"8bit\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "users.toml")
	code, stdout, stderr := run(t, cli.Env{}, "import", "libreqos", libreqosSample, "--config", main, "-o", out)
	if code != cli.ExitError || stdout != "" || !strings.Contains(stderr, "interface[1].bandwidth") || !strings.Contains(stderr, "nothing written") {
		t.Errorf("exit %d, stdout %q, stderr:\n%s", code, stdout, stderr)
	}
	if _, err := os.Stat(out); err == nil {
		t.Errorf("a refused import wrote %s", out)
	}
	checked := false
	env := cli.Env{CheckPlan: func(*config.Plan) []config.Error { checked = true; return nil }}
	if code, _, stderr := run(t, env, "import", "libreqos", libreqosSample, "-o", out); code != cli.ExitOK || !checked {
		t.Errorf("with Env.CheckPlan: exit %d, checked %v\n%s", code, checked, stderr)
	}
}
