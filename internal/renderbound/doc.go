// Package renderbound renders a chart with a CR's values in a separate, limited process
// before the manager renders it in its own, so that no template can take the manager's
// memory or hold one of its workers.
//
// Once a chart runs `tpl` over values (every Bitnami chart does, through
// common.tplvalues.render), whoever may edit a CR writes templates that the manager executes,
// and Go's text/template cannot be stopped or limited from inside: `{{ repeat 300000000 "x" }}`
// allocates 300 MB at once, `{{ range 100000 }}{{ range 100000 }}{{ end }}{{ end }}` loops
// for hours, and Sprig's until, untilStep, repeat and the string builders take any count. A
// goroutine can neither be given a memory limit nor be killed; a process can. So each new
// pair of chart and values is first rendered by a worker: the same binary, started with
// workerEnv set, in a process whose address space is limited (RLIMIT_AS), whose output is
// counted, that the checker kills at the deadline, and that the kernel's OOM killer takes
// before the manager. Only a render that stays within every bound is done again in the
// manager, by Helm, where the same chart and values cost the same.
//
// Files:
//   - bounds.go: the bounds, their defaults, and Exceeded, the error that names the bound.
//   - checker.go: the manager's side: a pool of workers, and the verdicts it remembers by
//     the digest of what was rendered, so that a CR whose values do not change is rendered
//     out of process once per process.
//   - worker.go: the worker's side, started from this package's init.
//   - wire.go: what the two exchange, the chart with its subcharts among it.
//
// What the worker cannot see: lookup answers empty there (as in `helm template`), and the
// cluster's capabilities are Helm's defaults. A template whose work depends on what lookup
// returns is checked on the empty answer (docs/security.md, "Template bounds").
package renderbound
