// The API's types, as the dashboard names them: aliases of the schemas generated from
// backend/server/openapi.yaml into api-schema.ts (`npm run gen:api`), so they cannot drift from the
// document. Only the block at the end is the dashboard's own.
import type { components } from './api-schema'

export type S = components['schemas']

export type Role = S['Role']
export type Status = S['Status']
export type Scope = S['Scope']
export type Visibility = S['Visibility']

export type User = S['User']
export type Session = S['Session']
export type Org = S['Org']
export type Member = S['Member']
export type Invitation = S['Invitation']
export type Token = S['Token']
export type BrowserSession = S['BrowserSession']
export type DeployToken = S['DeployToken']
export type Repo = S['Repo']
export type CodeCommit = S['CodeCommit']
export type CodeCommitDetail = S['CodeCommitDetail']
export type CodeFile = S['CodeFile']
export type CodeTree = S['CodeTree']
export type CodeBlob = S['CodeBlob']
export type PullRequest = S['PullRequest']
export type PullComment = S['PullComment']
export type PullReview = S['PullReview']
export type RepoPatch = S['RepoPatch']
export type Secret = S['Secret']
export type Job = S['Job']
export type Stage = S['Stage']
export type Pipeline = S['Pipeline']
export type Build = S['Build']
export type Schedule = S['Schedule']
export type BillingAccount = S['BillingAccount']
export type Usage = S['Usage']
export type LedgerEntry = S['LedgerEntry']
export type BillingNotification = S['BillingNotification']
export type AgentInfo = S['AgentInfo']
export type Pricing = S['Pricing']
export type PricedClass = S['PricedClass']
export type AdminOrg = S['AdminOrg']
export type ArtifactPackage = S['ArtifactPackage']
export type ArtifactFile = S['ArtifactFile']
/** `build` is the build whose pipeline published it; null when a person did. */
export type ArtifactVersion = S['ArtifactVersion']
export type Release = S['Release']
export type Record = S['Record']
export type RecordResource = S['RecordResource']
export type RecordDiff = S['RecordDiff']
export type Button = S['Button']
export type StorageUsage = S['StorageUsage']

/** One page of a list: every `…List` schema of the document has this shape. */
export interface Page<T> {
  items: T[]
  next_cursor?: S['NextCursor']
}

// ---- Dashboard-only (not API shapes) ------------------------------------------------------------

export const FINAL: ReadonlySet<Status> = new Set(['success', 'failed', 'cancelled', 'terminated', 'skipped'])
export const isFinal = (s: Status) => FINAL.has(s)
export const BILLING_ROLES: ReadonlySet<string> = new Set(['billing', 'admin', 'owner'])
/** The roles that may write to the team's repos (and so open and enter workspaces). */
export const WRITE_ROLES: ReadonlySet<string> = new Set(['developer', 'admin', 'owner'])
/** The roles in the order the member forms offer them, weakest first. */
export const ROLES: Role[] = ['reporter', 'billing', 'developer', 'admin', 'owner']

/** What each role may do, in words, where a role is chosen. */
export const ROLE_HELP: { [R in Role]: string } = {
  reporter: 'reporter: reads repos, builds and logs',
  billing: 'billing: reporter, plus the balance, usage and top-ups',
  developer: 'developer: reporter, plus push, run and cancel builds, workspaces',
  admin: 'admin: developer and billing, plus members, runners and repo settings',
  owner: 'owner: everything, including deleting the team',
}
