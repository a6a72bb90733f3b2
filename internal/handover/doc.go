// Package handover keeps a process that Kubernetes stops leading until a pod that can take
// over from it is Ready.
//
// A pod deleted by a drain, an eviction or `kubectl delete pod` gets SIGTERM as its
// replacement is created. controller-runtime then stops the controllers at once and releases
// the Lease, but the replacement fills its cache first (about 20 s at 10,000 CRs,
// docs/bench/restart-10000) and takes the Lease only then: with one replica nobody served
// in between. With SignalContext the stopping process goes on leading until another pod of
// its Deployment is Ready (its cache filled, /readyz) and then stops; the new pod takes the
// Lease at its next try. A rolling update's new pod is Ready before the old one is stopped,
// so that stop is not delayed; where no other pod comes (make undeploy, a scale to 0) the
// process stops after appearWait.
package handover
