// Package testutil holds helpers for tests only: heaptest measures the live heap an object
// holds, queuetest records what an event handler asks of a work queue, actiontest stands in
// for the Helm engine under a pipeline's layers. Only _test.go files import them, so neither
// the manager nor the sidecar is built with them (internal/gen's
// TestManagerImportsNoGeneratorOrTestHelper checks it).
package testutil
