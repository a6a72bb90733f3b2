package operator

import (
	"fmt"
	"reflect"

	"github.com/operator-framework/helm-operator-plugins/pkg/reconciler"

	"transwarp.io/tos/warpdrive-operator/internal/fairqueue"
)

// useFairQueue makes the helm reconciler's controller c, of that many workers, hand its work
// out by namespace in turn and keep one worker for the other namespaces
// (fairqueue.ForWorkers), before c starts.
//
// helm-operator-plugins v0.9.1 builds that controller itself, with controller.New and fixed
// options, and controller-runtime takes a queue only through the NewQueue option (a manager's
// defaults cannot set it). What a reconciler's setup funcs are handed is that controller:
// controller-runtime's own Controller type (in its internal controller package), whose
// exported NewQueue field is the option, read when the controller starts. So it is set there,
// by reflection, with a check of its type; if a new controller-runtime moves it, setup fails
// with this error (and TestHelmControllerUsesTheFairQueue) rather than running a queue that
// is not fair.
func useFairQueue(c reconciler.ControllerSetup, workers int) error {
	v := reflect.ValueOf(c)
	if v.Kind() != reflect.Pointer || v.Elem().Kind() != reflect.Struct {
		return fmt.Errorf("the helm reconciler's controller is a %T, not controller-runtime's controller: cannot set its queue", c)
	}
	f := v.Elem().FieldByName("NewQueue")
	newQueue := reflect.ValueOf(fairqueue.ForWorkers(workers))
	if !f.IsValid() || !f.CanSet() || f.Type() != newQueue.Type() {
		return fmt.Errorf("the helm reconciler's controller (%T) has no NewQueue field of type %s: cannot set its queue", c, newQueue.Type())
	}
	f.Set(newQueue)
	return nil
}
