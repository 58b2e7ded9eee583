package git

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// How a push tells the handler which refs it updated: every http-backend run gets
// core.hooksPath=<WorkDir>/hooks, whose post-receive copies its stdin ("<old> <new> <ref>" per
// accepted ref, exactly what was updated, nothing that was rejected) into the file named by
// pushLogEnv. Each push gets its own file, so concurrent pushes never mix, and git has run
// the hook before http-backend exits, so the file is complete when the handler reads it.
const pushLogEnv = "NIMBUS_PUSH_LOG"

// postReceive is the hook. Without the variable (someone running git by hand with this
// hooks path) it does nothing.
const postReceive = `#!/bin/sh
# Installed by Nimbus (backend/git): hands the accepted ref updates of a push to the server.
[ -n "$` + pushLogEnv + `" ] || exit 0
exec cat > "$` + pushLogEnv + `"
`

// installHooks writes the hook into dir, replacing an older version atomically so that a push
// running meanwhile sees either the old or the new script, never half of one.
func installHooks(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("git: create hooks dir: %w", err)
	}
	tmp, err := os.CreateTemp(dir, ".post-receive-*")
	if err != nil {
		return fmt.Errorf("git: write hook: %w", err)
	}
	defer os.Remove(tmp.Name()) // fails harmlessly once renamed
	if _, err := tmp.WriteString(postReceive); err != nil {
		tmp.Close()
		return fmt.Errorf("git: write hook: %w", err)
	}
	if err := tmp.Chmod(0o755); err != nil {
		tmp.Close()
		return fmt.Errorf("git: write hook: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("git: write hook: %w", err)
	}
	hook := filepath.Join(dir, "post-receive")
	if err := os.Rename(tmp.Name(), hook); err != nil {
		return fmt.Errorf("git: write hook: %w", err)
	}
	return checkHook(hook)
}

// checkHook runs the hook once the way git will. git skips a hook it cannot execute with no
// more than a hint on the pusher's terminal, and then no push would ever reach OnPush: a
// noexec mount or a missing /bin/sh must stop the server at start instead.
func checkHook(hook string) error {
	log, err := os.CreateTemp(filepath.Dir(hook), ".check-*")
	if err != nil {
		return fmt.Errorf("git: check hook: %w", err)
	}
	defer os.Remove(log.Name())
	log.Close()
	const line = ZeroSHA + " " + ZeroSHA + " refs/heads/check\n"
	if out, err := runHookOnce(hook, append(baseEnv(), pushLogEnv+"="+log.Name()), line); err != nil {
		return fmt.Errorf("git: hook %s does not run (a noexec mount?): %w: %s", hook, err, out)
	}
	got, err := os.ReadFile(log.Name())
	if err != nil || string(got) != line {
		return fmt.Errorf("git: hook %s wrote %q, want %q (%v)", hook, got, line, err)
	}
	return nil
}

// runHookOnce runs the freshly written hook, retrying while exec says ETXTBSY. The file was
// closed before the rename, but a fork elsewhere in the process (another goroutine starting
// any command) may have copied the write descriptor into a child that has not reached its own
// exec yet; until it does, the kernel refuses to execute the file (golang/go#22315). That
// window is microseconds, so a few short retries end it; a real noexec mount fails every try.
func runHookOnce(hook string, env []string, stdin string) ([]byte, error) {
	var out []byte
	var err error
	for try := 0; try < 20; try++ {
		c := exec.Command(hook)
		c.Env = env
		c.Stdin = strings.NewReader(stdin)
		if out, err = c.CombinedOutput(); !errors.Is(err, syscall.ETXTBSY) {
			return out, err
		}
		time.Sleep(time.Duration(try+1) * 5 * time.Millisecond)
	}
	return out, err
}

// readPushLog parses what the hook wrote. An empty file means no ref changed (an up-to-date
// push, or every ref rejected).
func readPushLog(path string) ([]RefUpdate, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("git: open push log: %w", err)
	}
	defer f.Close()
	var updates []RefUpdate
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if line == "" {
			continue
		}
		fields := strings.Fields(line)
		if len(fields) != 3 || !isSHA(fields[0]) || !isSHA(fields[1]) || !strings.HasPrefix(fields[2], "refs/") {
			return nil, fmt.Errorf("git: push log: bad line %q", line)
		}
		updates = append(updates, RefUpdate{Old: fields[0], New: fields[1], Ref: fields[2]})
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("git: read push log: %w", err)
	}
	return updates, nil
}
