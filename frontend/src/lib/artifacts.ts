// The copy-paste commands of the Artifacts page: how an inference service or a person downloads
// a model file (curl with a deploy token, the nimbus CLI) and pulls from the OCI registry.
import type { ArtifactFile } from './types'

export interface FileCommands {
  curl: string
  verify: string
  nimbus: string
}

/** Commands that download one file of a version, resumably, with a deploy token. */
export function fileCommands(server: string, repo: string, f: ArtifactFile): FileCommands {
  const hex = f.digest.replace(/^sha256:/, '')
  return {
    // -C - resumes a cut download; -L follows a redirect to presigned storage (curl drops the
    // Authorization header on the way there).
    curl: `curl -fL -C - -H "Authorization: Bearer $NIMBUS_DEPLOY_TOKEN" -o ${f.name} ${f.download_url}`,
    verify: `echo "${hex}  ${f.name}" | sha256sum -c -`,
    nimbus: `NIMBUS_TOKEN=$NIMBUS_DEPLOY_TOKEN nimbus artifact pull --server ${server} ${repo} ${f.package} ${f.version} ${f.name}`,
  }
}

/** The CLI command that pulls every file of a version. */
export function versionCommand(server: string, repo: string, pkg: string, version: string): string {
  return `NIMBUS_TOKEN=$NIMBUS_DEPLOY_TOKEN nimbus artifact pull --server ${server} ${repo} ${pkg} ${version}`
}

/** Registry commands for an image or OCI artifact of the repo (NAME:TAG left to fill in). */
export function registryCommands(cloneUrl: string, org: string, repo: string) {
  const u = new URL(cloneUrl)
  const name = `${u.host}/${org.toLowerCase()}/${repo.toLowerCase()}`
  const plain = u.protocol === 'http:' ? ' --plain-http' : ''
  return {
    name,
    login: `docker login ${u.host} -u deploy -p "$NIMBUS_DEPLOY_TOKEN"`,
    docker: `docker pull ${name}/NAME:TAG`,
    oras: `oras pull${plain} -u deploy -p "$NIMBUS_DEPLOY_TOKEN" ${name}/NAME:TAG`,
  }
}

/**
 * What a new deploy token is for, shown where it is made: the token kept in an environment
 * variable, then a model downloaded with the CLI and an image pulled from the registry.
 */
export function deployTokenUsage(server: string, cloneUrl: string, org: string, repo: string, token: string): string {
  const reg = registryCommands(cloneUrl, org, repo)
  return [
    `export NIMBUS_DEPLOY_TOKEN=${token}`,
    `# the nimbus CLI: curl -fsSLo nimbus ${server}/downloads/nimbus-linux-amd64 && chmod +x nimbus`,
    `${versionCommand(server, `${org}/${repo}`, 'PACKAGE', 'latest')}`,
    reg.login,
    reg.docker,
  ].join('\n')
}
