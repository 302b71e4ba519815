// Package migrate converts other tools' lists of shaped users into
// shaperd's users.toml (and tiers): LibreQoS's ShapedDevices.csv and a
// plain name,tier,addresses CSV, and LibreQoS's network.json into
// [nodes.NAME] tables; and it writes a configuration back as LibreQoS's
// ShapedDevices.csv and network.json. Readers report every bad row with
// its line number; Validate checks the result with pkg/config exactly as
// `shaperd --check` would, so an import never writes a file shaperd refuses.
package migrate
