package git

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

// A hook whose file is still open for writing somewhere (a child forked elsewhere in the
// process that has not exec'd yet) is refused with ETXTBSY; checkHook waits that out instead
// of refusing to start the server.
func TestCheckHookWaitsOutTextFileBusy(t *testing.T) {
	dir := t.TempDir()
	if err := installHooks(dir); err != nil {
		t.Fatal(err)
	}
	hook := filepath.Join(dir, "post-receive")
	w, err := os.OpenFile(hook, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	released := make(chan struct{})
	go func() {
		time.Sleep(30 * time.Millisecond)
		w.Close()
		close(released)
	}()
	if err := checkHook(hook); err != nil {
		t.Fatalf("checkHook with a writer open for 30 ms: %v", err)
	}
	select {
	case <-released:
	default:
		t.Fatal("checkHook passed before the writer closed: the test did not exercise ETXTBSY")
	}
}

// A hook that can never run still fails, after the retries.
func TestCheckHookFailsWhenNotExecutable(t *testing.T) {
	dir := t.TempDir()
	if err := installHooks(dir); err != nil {
		t.Fatal(err)
	}
	hook := filepath.Join(dir, "post-receive")
	if err := os.Chmod(hook, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := checkHook(hook); err == nil {
		t.Fatal("checkHook of a non-executable hook passed")
	}
}
