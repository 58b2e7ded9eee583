// The API's types (backend/server/openapi.yaml), as the dashboard uses them.
export type Role = 'owner' | 'admin' | 'billing' | 'developer' | 'reporter'
export type Status = 'queued' | 'running' | 'success' | 'failed' | 'cancelled' | 'terminated' | 'skipped'

export interface User {
  id: number
  username: string
  email: string
  is_admin: boolean
  created_at: string
  csrf_token?: string
}
export interface Session {
  user: User
  csrf_token: string
}
export interface Page<T> {
  items: T[]
  next_cursor?: string
}
export interface Org {
  id: number
  name: string
  role?: Role
  created_at: string
}
export interface Member {
  user_id: number
  username: string
  role: Role
  joined_at: string
}
export interface Invitation {
  id: number
  org: string
  username?: string
  email?: string
  role: Role
  invited_by: string
  created_at: string
  expires_at: string
}
export interface Token {
  id: number
  name: string
  prefix: string
  scopes: string[]
  expires_at: string | null
  last_used_at: string | null
  revoked_at: string | null
  created_at: string
  token?: string
}
export interface Repo {
  id: number
  org: string
  name: string
  full_name: string
  description: string
  visibility: 'private' | 'public'
  default_branch: string
  archived: boolean
  clone_url: string
  permission?: 'read' | 'write' | 'admin'
  created_at: string
  updated_at: string
}
export interface Secret {
  id: number
  name: string
  created_at: string
  updated_at: string
}
export interface Job {
  id: number
  name: string
  status: Status
  exit_code?: number
}
export interface Stage {
  name: string
  kind?: 'fail' | 'end'
  status: Status
  parallel: boolean
  jobs: Job[]
}
export interface Pipeline {
  id: number
  key: string
  name: string
  status: Status
  reason: string
  runner_tag: string
  cpus: number
  started_at: string | null
  finished_at: string | null
  core_seconds: number
  cost: string
  stages?: Stage[]
}
export interface Build {
  id: number
  number: number
  event: string
  branch: string
  tag?: string
  commit: string
  commit_message: string
  triggered_by: string
  status: Status
  created_at: string
  started_at: string | null
  finished_at: string | null
  pipelines: Pipeline[]
  error?: { message: string; file: string; line: number; column: number }
}
export interface BillingAccount {
  currency: string
  balance: string
  frozen: string
  free_quota: { total_core_seconds: number; used_core_seconds: number; frozen_core_seconds: number; left_core_seconds: number }
  month: string
  month_spent: string
  spending_cap: string | null
  low_balance_threshold: string | null
  alert_webhook_url: string
  topups: { enabled: boolean; min: string; max: string }
}
export interface Usage {
  date: string
  runner_class: string
  repo_id: number
  repo: string
  pipelines: number
  core_seconds: number
  quota_core_seconds: number
  cost: string
}
export interface LedgerEntry {
  id: number
  kind: string
  amount: string
  balance_change: string
  frozen_change: string
  pipeline_id: number | null
  note: string
  created_at: string
}
export interface BillingNotification {
  id: number
  kind: string
  message: string
  delivered: boolean
  created_at: string
}
export interface AgentInfo {
  id: string
  name: string
  version: string
  tags: string[]
  executor: string
  cpus: number
  free_cpus: number
  memory_bytes: number
  gpus: { index: number; uuid?: string; name: string; memoryMiB: number }[]
  free_gpus: number
  concurrency: number
  online: boolean
  last_seen_at: string
  created_at: string
  pipelines: { id: number; name: string; runner_tag: string; cpus: number; org: string; repo: string; build_number: number; started_at: string | null }[]
}

export const FINAL: ReadonlySet<Status> = new Set(['success', 'failed', 'cancelled', 'terminated', 'skipped'])
export const isFinal = (s: Status) => FINAL.has(s)
export const BILLING_ROLES: ReadonlySet<string> = new Set(['billing', 'admin', 'owner'])
export const ROLES: Role[] = ['reporter', 'billing', 'developer', 'admin', 'owner']
export interface ArtifactPackage {
  name: string
  version_count: number
  latest: string
  created_at: string
  updated_at: string
}
export interface ArtifactFile {
  package: string
  version: string
  name: string
  size: number
  digest: string
  created_at: string
  download_url: string
}
export interface ArtifactVersion {
  package: string
  version: string
  file_count: number
  size: number
  /** The build whose pipeline published it; null when a person did. */
  build: { number: number; pipeline_id: number; commit: string } | null
  pushed_by: string
  created_at: string
  files?: ArtifactFile[]
}
export interface StorageUsage {
  used_bytes: number
  registry_bytes: number
  file_bytes: number
  quota_bytes: number
}
