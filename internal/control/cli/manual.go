package cli

import (
	"maps"
	"slices"
)

// HelpTopics returns the commands `shaperctl help CMD` explains, sorted:
// the man page generator (internal/cmd/genman) documents each.
func HelpTopics() []string {
	return slices.Sorted(maps.Keys(commandHelp))
}
