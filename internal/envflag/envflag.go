// Package envflag binds command-line flags to NIMBUS_* environment variables, so every binary of
// Nimbus (server, agent, CLI) is configured the same way and its --help lists each flag with the
// variable that sets it.
//
// Precedence is flag > environment > default. A value that comes from the environment is parsed by
// the same flag.Value as a command-line value, so a bad NIMBUS_* value fails with the variable's
// name in the error instead of being ignored.
//
// It lives under agent/ because agent packages may never import backend packages, while the
// backend may import this one.
package envflag

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"
)

// Set is a flag set whose flags each have an environment variable.
type Set struct {
	fs       *flag.FlagSet
	name     string
	synopsis string
	envs     map[string]string // flag name -> env var
	order    []string          // flag names in registration order, for --help
}

// New returns an empty set for the command name; synopsis is the first paragraph of --help.
func New(name, synopsis string) *Set {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard) // Parse reports errors itself, with the env var where it applies
	return &Set{fs: fs, name: name, synopsis: synopsis, envs: map[string]string{}}
}

func (s *Set) register(name, env string) {
	s.order = append(s.order, name)
	if env != "" {
		s.envs[name] = env
	}
}

// String defines a string flag.
func (s *Set) String(p *string, name, env, def, usage string) {
	s.fs.StringVar(p, name, def, usage)
	s.register(name, env)
}

// Bool defines a boolean flag; the environment accepts what strconv.ParseBool accepts.
func (s *Set) Bool(p *bool, name, env string, def bool, usage string) {
	s.fs.BoolVar(p, name, def, usage)
	s.register(name, env)
}

// Int defines an integer flag.
func (s *Set) Int(p *int, name, env string, def int, usage string) {
	s.fs.IntVar(p, name, def, usage)
	s.register(name, env)
}

// Duration defines a duration flag (Go syntax: 30s, 5m, 1h30m).
func (s *Set) Duration(p *time.Duration, name, env string, def time.Duration, usage string) {
	s.fs.DurationVar(p, name, def, usage)
	s.register(name, env)
}

// Var defines a flag with a custom value.
func (s *Set) Var(v flag.Value, name, env, usage string) {
	s.fs.Var(v, name, usage)
	s.register(name, env)
}

// Args returns the arguments left after the flags.
func (s *Set) Args() []string { return s.fs.Args() }

// Parse parses args, then fills every flag not given on the command line from its environment
// variable (read through getenv, so tests need not touch the process environment). On -h/--help
// it writes the usage to out and returns flag.ErrHelp.
func (s *Set) Parse(args []string, getenv func(string) string, out io.Writer) error {
	if err := s.fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			s.Usage(out)
			return flag.ErrHelp
		}
		return fmt.Errorf("%s: %w (see --help)", s.name, err)
	}
	given := map[string]bool{}
	s.fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
	for _, name := range s.order {
		env, ok := s.envs[name]
		if !ok || given[name] {
			continue
		}
		v := getenv(env)
		if v == "" {
			continue
		}
		if err := s.fs.Set(name, v); err != nil {
			return fmt.Errorf("%s: invalid %s=%q: %w", s.name, env, v, err)
		}
	}
	return nil
}

// Usage writes the synopsis and a table of every flag, its variable, its default and its meaning.
func (s *Set) Usage(w io.Writer) {
	fmt.Fprintf(w, "%s\n\nFlags (flag > environment variable > default):\n", strings.TrimSpace(s.synopsis))
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	for _, name := range s.order {
		f := s.fs.Lookup(name)
		env := s.envs[name]
		if env == "" {
			env = "-"
		}
		def := f.DefValue
		if def == "" {
			def = `""`
		}
		fmt.Fprintf(tw, "  --%s\t%s\t(default %s)\t%s\n", name, env, def, f.Usage)
	}
	tw.Flush()
}
