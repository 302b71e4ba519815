package cli

import (
	"errors"
	"strings"

	"github.com/shaperd/shaperd/internal/control"
	"github.com/shaperd/shaperd/internal/control/jsonout"
)

// ErrorObject is the --json form of err, a command's failure with exit
// code code: the message as on standard error (without "shaperctl: "),
// the unknown target of a 404, the problems of a refused reload.
func ErrorObject(err error, code int) jsonout.ErrorObject {
	e := jsonout.ErrorObject{Error: err.Error(), ExitCode: code}
	var nf *control.NotFoundError
	if errors.As(err, &nf) {
		e.Target = nf.Target
	}
	var ve *control.ValidationError
	if errors.As(err, &ve) {
		e.Problems = jsonout.Problems(ve.Problems)
	}
	var ue *usageError
	if errors.As(err, &ue) && ue.cmd != "" {
		e.Error = ue.cmd + ": " + ue.msg
	}
	e.Error = strings.TrimSpace(e.Error)
	return e
}
