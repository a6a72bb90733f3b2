// Package podidentity names what a process learns of its pod, who it is: the variables the
// Deployment gives both containers from the downward API (config/manager/manager.yaml) and
// the file in which the kubelet mounts the pod's namespace. Outside a pod none of them is
// set.
package podidentity
