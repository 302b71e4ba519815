package control

import (
	"errors"
	"fmt"
	"strings"
)

// NotFoundError says a target names no user, tier or interface (404).
type NotFoundError struct {
	Target string
}

func (e *NotFoundError) Error() string {
	return fmt.Sprintf("unknown target %q: no such user, tier:NAME, node:NAME or iface:NAME ('shaperctl status' lists them)", e.Target)
}

// BadRequestError is a request the daemon will not honour, with a message
// saying why and what to do (400).
type BadRequestError struct {
	Message string
	// Usage marks a value of the command line that is malformed (a rate
	// without a unit, a --set or --demand that does not parse, an address
	// that is none), as opposed to a well-formed request the plan refuses:
	// shaperctl exits 2 for it, as for any usage error it finds itself.
	Usage bool
}

func (e *BadRequestError) Error() string { return e.Message }

// BadRequest returns a *BadRequestError with a formatted message.
func BadRequest(format string, args ...any) error {
	return &BadRequestError{Message: fmt.Sprintf(format, args...)}
}

// BadUsage returns a *BadRequestError with a formatted message for a
// malformed value (Usage set).
func BadUsage(format string, args ...any) error {
	return &BadRequestError{Message: fmt.Sprintf(format, args...), Usage: true}
}

// ValidationError is a refused reload: the new configuration has Problems
// (one "file:line:col: message" each) and the old one stays in force (422).
type ValidationError struct {
	Problems []string
}

func (e *ValidationError) Error() string {
	n := len(e.Problems)
	if n == 0 {
		return "configuration refused; the old one stays in force"
	}
	noun := "errors"
	if n == 1 {
		noun = "error"
	}
	return fmt.Sprintf("configuration refused (%d %s; the old one stays in force):\n  %s",
		n, noun, strings.Join(e.Problems, "\n  "))
}

// ErrUnavailable says the daemon cannot serve the request now, e.g. while it
// starts or stops (503). Wrap it with context.
var ErrUnavailable = errors.New("shaperd is not ready")

// APIError is what Client returns for an error answer from the server.
// Err is the typed error the status maps to (*NotFoundError,
// *BadRequestError, *ForbiddenError, *ValidationError, ErrUnavailable) or nil, so errors.As
// and errors.Is work on the client as on the server.
type APIError struct {
	// StatusCode is the HTTP status.
	StatusCode int
	// Message is the server's message.
	Message string
	Err     error
}

// Error returns the server's message.
func (e *APIError) Error() string { return e.Message }

// Unwrap returns the typed error, if any.
func (e *APIError) Unwrap() error { return e.Err }
