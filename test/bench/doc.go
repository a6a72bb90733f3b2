// Package bench measures the operator on the local cluster against the stock helm-operator
// and against plain `kubectl apply` of the same manifests (make bench). Its tests run only
// when WARPDRIVE_BENCH=1: they take minutes to hours, and their figures are reports, not
// assertions.
package bench
