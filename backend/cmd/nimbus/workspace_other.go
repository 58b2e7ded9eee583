//go:build !unix

package main

import "os"

// notifyResize does nothing where terminals send no SIGWINCH (Windows): the workspace's
// terminal keeps the size it started with.
func notifyResize(chan<- os.Signal) {}

// notifyHangup does nothing where there is no SIGHUP.
func notifyHangup(chan<- os.Signal) {}
