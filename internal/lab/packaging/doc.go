// Package packaging holds the tests of what ships besides the Go code:
// the Debian package that scripts/package.sh builds (built, inspected,
// linted, installed and purged) and the monitoring files in contrib/ (the
// Grafana dashboard and the Prometheus alerts, checked with promtool
// against a real scrape of shaperd). It has no code of its own.
//
// The tests need root and tools (dpkg-deb, lintian, promtool, ip); they
// skip without them, and fail instead with SHAPERD_REQUIRE_NETNS=1 (CI).
package packaging
