package git

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
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

// fastForwardEnv names, for a push, the refs it may only move forward: one line per ref,
// "<ref> <reason>" (fastForwardList). The pre-receive hook refuses the whole push when one of
// them would move to a commit that does not contain its old one.
const fastForwardEnv = "NIMBUS_FAST_FORWARD_ONLY"

// preReceive is the guard's hook. It runs once the pack is in (in git's quarantine, where
// merge-base sees the new objects) and before any ref moves; what it prints on stderr reaches
// the pusher as "remote: …" lines.
const preReceive = `#!/bin/sh
# Installed by Nimbus (backend/git): holds protected refs to fast-forwards.
[ -n "$` + fastForwardEnv + `" ] || exit 0
zero=0000000000000000000000000000000000000000
status=0
while read old new ref; do
	[ "$old" = "$zero" ] && continue
	[ "$new" = "$zero" ] && continue
	reason=$(printf '%s\n' "$` + fastForwardEnv + `" | while read r why; do [ "$r" = "$ref" ] && printf '%s' "$why"; done)
	[ -n "$reason" ] || continue
	if ! git merge-base --is-ancestor "$old" "$new"; then
		echo "error: refusing a force push to $ref: $reason" >&2
		status=1
	fi
done
exit $status
`

// fastForwardList is the value of fastForwardEnv: sorted, one line per ref.
func fastForwardList(refs map[string]string) string {
	lines := make([]string, 0, len(refs))
	for ref, why := range refs {
		lines = append(lines, ref+" "+oneLine(why))
	}
	slices.Sort(lines)
	return strings.Join(lines, "\n")
}

// installHooks writes the hooks into dir, each replacing an older version atomically so that a
// push running meanwhile sees either the old or the new script, never half of one.
func installHooks(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("git: create hooks dir: %w", err)
	}
	if err := writeHook(dir, "pre-receive", preReceive); err != nil {
		return err
	}
	if err := writeHook(dir, "post-receive", postReceive); err != nil {
		return err
	}
	return checkHook(filepath.Join(dir, "post-receive"))
}

// writeHook writes one executable hook, replacing an older version by a rename.
func writeHook(dir, name, script string) error {
	tmp, err := os.CreateTemp(dir, "."+name+"-*")
	if err != nil {
		return fmt.Errorf("git: write hook: %w", err)
	}
	defer os.Remove(tmp.Name()) // fails harmlessly once renamed
	_, err = tmp.WriteString(script)
	err = errors.Join(err, tmp.Chmod(0o755), tmp.Close())
	if err == nil {
		err = os.Rename(tmp.Name(), filepath.Join(dir, name))
	}
	if err != nil {
		return fmt.Errorf("git: write hook %s: %w", name, err)
	}
	return nil
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
