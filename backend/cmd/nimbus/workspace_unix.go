//go:build unix

package main

import (
	"os"
	"os/signal"
	"syscall"
)

// notifyResize sends c the terminal's size changes.
func notifyResize(c chan<- os.Signal) { signal.Notify(c, syscall.SIGWINCH) }

// notifyHangup sends c the SIGHUP that OpenSSH ends its ProxyCommand with.
func notifyHangup(c chan<- os.Signal) { signal.Notify(c, syscall.SIGHUP) }
