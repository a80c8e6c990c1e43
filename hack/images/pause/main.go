// Command pause is the sandbox ("pause") container of make run's node: it holds a pod's
// namespaces open, reaps the orphans that end up with it as init of a shared PID
// namespace, and exits on SIGINT or SIGTERM, as registry.k8s.io/pause does. It is built
// here because no registry is reachable from the machines make run runs on.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	signals := make(chan os.Signal, 8)
	signal.Notify(signals, syscall.SIGINT, syscall.SIGTERM, syscall.SIGCHLD)
	for sig := range signals {
		if sig != syscall.SIGCHLD {
			os.Exit(0)
		}
		reapChildren()
	}
}

// reapChildren waits for every child that has exited, so none stays a zombie.
func reapChildren() {
	for {
		var status syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &status, syscall.WNOHANG, nil)
		if pid <= 0 || err != nil {
			return
		}
	}
}
