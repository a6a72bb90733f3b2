package refusal

import (
	"errors"

	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"transwarp.io/tos/warpdrive-operator/internal/statuscontract"
)

// refusal is the error of a layer that refuses a CR for a reason of its own, with the failure
// that the CR's conditions and its Warning Event report: the outcomes and release events
// layers take reason and message from it instead of naming the Helm action that failed.
type refusal struct{ failure statuscontract.Failure }

func (r refusal) Error() string { return r.failure.Message }

// Refuse returns f as the error a layer returns: terminal if f is, so that controller-runtime
// does not retry what only an edit can mend (that edit's event reconciles the CR again).
func Refuse(f statuscontract.Failure) error {
	if f.Terminal {
		return reconcile.TerminalError(refusal{f})
	}
	return refusal{f}
}

// Of is the failure err carries, if a layer refused the CR (err, or an error it wraps, came
// from Refuse).
func Of(err error) (statuscontract.Failure, bool) {
	var r refusal
	if errors.As(err, &r) {
		return r.failure, true
	}
	return statuscontract.Failure{}, false
}
