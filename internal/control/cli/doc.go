// Package cli is shaperctl: its commands, argument parsing and output, as
// a function (Run) that tests can call without a process. cmd/shaperctl is
// a thin main around it.
package cli
