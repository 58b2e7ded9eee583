// Package git is Nimbus's git hosting: the smart HTTP endpoints that `git clone`, `fetch` and
// `push` talk to, and the read helpers the build trigger uses on a pushed commit.
//
// Everything runs the real git binary (exec, never a shell) with a clean environment: no
// system or global config, no inherited GIT_* variables. Two halves:
//
//   - Handler (NewHandler) serves /{org}/{repo}.git/{info/refs,git-upload-pack,git-receive-pack}
//     by running `git http-backend` as a streaming CGI program. It knows nothing of users or
//     permissions: HandlerConfig.Resolve authenticates and authorizes each request and answers
//     with the repo's path or one of ErrUnauthenticated (401), ErrNotFound (404),
//     ErrForbidden (403). After a push, HandlerConfig.OnPush gets exactly the refs that changed,
//     and the lines it returns end git's answer: the pusher sees them as "remote: …".
//   - Storage helpers (InitBare, SetHEAD, IsEmpty, Branches, ResolveRef, ReadFile,
//     ChangedFiles, NewCommits, Commit) work on a bare repository's path. Inputs from users
//     (revisions, paths, branch names) are checked and reach git on stdin or behind a fixed
//     prefix, never as options.
//
// The package is meant for the repo service and the server's wiring; it has no database and
// no idea of orgs beyond the two names in the URL. See README.md for the flow of a push.
package git
