// pause: the sandbox process of every pod on the lastseen test-bed node. It holds the pod's
// namespaces, reaps orphaned children (it is PID 1 when the pod shares its PID namespace) and exits
// on SIGTERM or SIGINT. Built as a static binary (CGO_ENABLED=0) so its image needs nothing else.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	sig := make(chan os.Signal, 8)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT, syscall.SIGCHLD)
	for s := range sig {
		if s != syscall.SIGCHLD {
			os.Exit(0)
		}
		for {
			var ws syscall.WaitStatus
			pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil)
			if pid <= 0 || err != nil {
				break
			}
		}
	}
}
