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
//
// A process that crashed is not stopped: it ends, its Lease left held by its pod, and the
// kubelet starts it again. With YieldToStandby the restarted process, before anything else,
// hands that Lease to another pod of its Deployment that is Ready, when there is one, so that
// a standby with its cache full serves at once instead of after the restarted process has
// filled its own. With Succession the standby does not wait for that restart: it watches the
// other pods of its Deployment and takes the Lease as soon as the kubelet reports the end of
// the leader's process, which StampedLock lets it tell from a successor's in the same pod.
// Whichever way the Lease changes hands, WakingLock lets the new holder's elector see it at
// once rather than at its next retry, one to two seconds later; and DeferredCache keeps the
// restarted process from filling its cache while the new holder starts serving.
package handover
