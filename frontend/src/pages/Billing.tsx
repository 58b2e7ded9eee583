import { useEffect, useMemo, useState, type FormEvent } from 'react'
import { Link, useParams, useSearchParams } from 'react-router'
import { useInfiniteQuery, useMutation, useQuery, useQueryClient } from '@tanstack/react-query'
import { endpoints } from '../lib/endpoints'
import type { BillingAccount, LedgerEntry } from '../lib/types'
import { BUCKETS, bucketTotals, shapeUsage, type Bucket } from '../lib/charts'
import { StackedBars } from '../components/StackedBars'
import { Empty, ErrorBox, Field, FormError, Loading, Notice, QueryView } from '../components/ui'
import { coreHours, coreSeconds, dateTime, money } from '../lib/format'
import { PricingPanel } from '../components/Pricing'
import { useUser } from '../session'
import { keys } from '../lib/keys'
import { repoPath } from '../components/RepoHeader'

const today = () => {
  const d = new Date()
  return `${d.getFullYear()}-${String(d.getMonth() + 1).padStart(2, '0')}-${String(d.getDate()).padStart(2, '0')}`
}

/** One bucket's free CPU quota of the month: builds and workspaces each have their own. */
function QuotaGauge({ q, bucket, month }: { q: BillingAccount['free_quota']; bucket: Bucket; month: string }) {
  const used = q.used_core_seconds + q.frozen_core_seconds
  const pct = q.total_core_seconds > 0 ? Math.min(100, (used / q.total_core_seconds) * 100) : 100
  const id = `quota-label-${bucket}`
  return (
    <div className="stat" data-quota={bucket}>
      <span className="label" id={id}>
        Free {bucket === 'workspace' ? 'workspace' : 'build'} CPU quota, {month}
      </span>
      <div className="gauge" role="meter" aria-labelledby={id} aria-valuemin={0} aria-valuemax={q.total_core_seconds} aria-valuenow={used} aria-valuetext={`${pct.toFixed(0)}% used`}>
        <div className="gauge-used" style={{ width: `${(q.used_core_seconds / Math.max(1, q.total_core_seconds)) * 100}%` }} />
        <div className="gauge-frozen" style={{ width: `${(q.frozen_core_seconds / Math.max(1, q.total_core_seconds)) * 100}%` }} />
      </div>
      <span className="muted" title={`${coreSeconds(q.used_core_seconds)} used of ${coreSeconds(q.total_core_seconds)}`}>
        {coreHours(q.used_core_seconds)} used{q.frozen_core_seconds ? `, ${coreHours(q.frozen_core_seconds)} held` : ''} of {coreHours(q.total_core_seconds)} ·{' '}
        <span data-testid={bucket === 'workspace' ? 'workspace-quota-left' : 'quota-left'}>{coreHours(q.left_core_seconds)} left</span>
      </span>
    </div>
  )
}

function Summary({ a }: { a: BillingAccount }) {
  return (
    <div className="stats">
      <div className="stat">
        <span className="label">Balance</span>
        <strong className="big" data-testid="balance">
          {money(a.balance, a.currency)}
        </strong>
      </div>
      <div className="stat">
        <span className="label">Frozen for running pipelines</span>
        <strong className="big">{money(a.frozen, a.currency)}</strong>
      </div>
      <div className="stat">
        <span className="label" title={`Calendar month in ${a.time_zone}`}>Spent in {a.month}</span>
        <strong className="big" data-testid="month-spent">
          {money(a.month_spent, a.currency)}
        </strong>
        <span className="muted" data-testid="month-by-bucket">
          builds {money(a.month_by_bucket.build.spent, a.currency)} · workspaces {money(a.month_by_bucket.workspace.spent, a.currency)}
        </span>
        <span className="muted">{a.spending_cap ? `cap ${money(a.spending_cap, a.currency)}, builds and workspaces together` : 'no spending cap'}</span>
        {Number(a.month_written_off) > 0 && (
          <span className="muted" data-testid="month-written-off" title="Run time past a pipeline's last covered window that the balance could not pay: not charged, not counted by the cap">
            {money(a.month_written_off, a.currency)} written off
          </span>
        )}
      </div>
      <QuotaGauge q={a.free_quota} bucket="build" month={a.month} />
      <QuotaGauge q={a.workspace_free_quota} bucket="workspace" month={a.month} />
    </div>
  )
}

function TopUp({ org, a }: { org: string; a: BillingAccount }) {
  const [amount, setAmount] = useState('')
  const go = useMutation({
    mutationFn: () => endpoints.billing.topup(org, { amount }),
    onSuccess: (t) => window.location.assign(t.checkout_url),
  })
  const submit = (e: FormEvent) => {
    e.preventDefault()
    go.mutate()
  }
  return (
    <form onSubmit={submit} className="card" aria-labelledby="topup-h">
      <h2 id="topup-h">Top up</h2>
      {!a.topups.enabled ? (
        <NoTopups org={org} a={a} />
      ) : (
        <>
          <Field label={`Amount (${a.currency})`} hint={`From ${money(a.topups.min, a.currency)} to ${money(a.topups.max, a.currency)}. You pay on Stripe's page and come back here.`}>
            {(id, d) => (
              <input id={id} type="number" required min={Number(a.topups.min)} max={Number(a.topups.max)} step="0.01" value={amount} onChange={(e) => setAmount(e.target.value)} aria-describedby={d} />
            )}
          </Field>
          <FormError error={go.error} />
          <button type="submit" disabled={go.isPending}>
            {go.isPending ? 'Opening Stripe…' : 'Pay with Stripe'}
          </button>
        </>
      )}
    </form>
  )
}

/** Where money comes from when the installation takes no payments: who to ask, by name. */
function NoTopups({ org, a }: { org: string; a: BillingAccount }) {
  const me = useUser().data
  const who = a.credit_from.length === 0 ? 'a platform admin of this installation' : a.credit_from.length === 1 ? a.credit_from[0] : a.credit_from.join(', ')
  return (
    <div data-testid="no-topups">
      <p>
        This installation takes no payments, so the balance grows only when a platform admin grants credit. Ask{' '}
        <strong>{who}</strong> (the installation’s platform {a.credit_from.length > 1 ? 'admins' : 'admin'}) to grant credit to <strong>{org}</strong>.
      </p>
      {me?.is_admin && (
        <p>
          You are a platform admin: <Link to={`/admin/teams?grant=${encodeURIComponent(org)}`}>grant credit to {org}</Link>.
        </p>
      )}
    </div>
  )
}

function Settings({ org, a }: { org: string; a: BillingAccount }) {
  const qc = useQueryClient()
  const init = () => ({ cap: a.spending_cap ?? '', low: a.low_balance_threshold ?? '', hook: a.alert_webhook_url })
  const [f, setF] = useState(init)
  useEffect(() => setF(init()), [a]) // eslint-disable-line react-hooks/exhaustive-deps
  const save = useMutation({
    mutationFn: () =>
      endpoints.billing.putSettings(org, {
        spending_cap: f.cap.trim() === '' ? null : f.cap.trim(),
        low_balance_threshold: f.low.trim() === '' ? null : f.low.trim(),
        alert_webhook_url: f.hook.trim(),
      }),
    onSuccess: (na) => qc.setQueryData(['billing', org], na),
  })
  const submit = (e: FormEvent) => {
    e.preventDefault()
    save.mutate()
  }
  return (
    <form onSubmit={submit} className="card" aria-labelledby="controls-h">
      <h2 id="controls-h">Spending controls and alerts</h2>
      <div className="grid2">
        <Field label={`Monthly spending cap (${a.currency})`} hint="Empty: no cap. Alerts at 50, 80 and 100 %; no new pipeline starts past it.">
          {(id, d) => <input id={id} inputMode="decimal" pattern="\d+(\.\d{1,8})?" value={f.cap} onChange={(e) => setF({ ...f, cap: e.target.value })} aria-describedby={d} />}
        </Field>
        <Field label={`Low-balance alert below (${a.currency})`} hint="Empty: no alert.">
          {(id, d) => <input id={id} inputMode="decimal" pattern="\d+(\.\d{1,8})?" value={f.low} onChange={(e) => setF({ ...f, low: e.target.value })} aria-describedby={d} />}
        </Field>
      </div>
      <Field label="Alert webhook URL" hint="Every alert is POSTed there as JSON. Empty: none.">
        {(id, d) => <input id={id} type="url" value={f.hook} onChange={(e) => setF({ ...f, hook: e.target.value })} aria-describedby={d} placeholder="https://hooks.example.com/nimbus" />}
      </Field>
      <FormError error={save.error} />
      {save.isSuccess && <Notice kind="success">Saved.</Notice>}
      <button type="submit" disabled={save.isPending}>
        Save
      </button>
    </form>
  )
}

function UsageCharts({ org, month, zone }: { org: string; month: string; zone: string }) {
  const [from, setFrom] = useState(`${month}-01`)
  // Empty: up to today in the billing time zone, which the server knows (it may be tomorrow here).
  const [to, setTo] = useState('')
  const q = useQuery({
    queryKey: keys.billing.usage(org, from, to),
    queryFn: () => endpoints.billing.usage(org, from, to),
    refetchInterval: 30_000,
  })
  const end = useMemo(() => to || (q.data ?? []).reduce((m, r) => (r.date > m ? r.date : m), today()), [q.data, to])
  // Builds and workspaces are billed in buckets of their own: each gets its charts.
  const charts = useMemo(
    () =>
      q.data
        ? BUCKETS.map(({ bucket, label }) => {
            const rows = q.data.filter((r) => r.bucket === bucket)
            return { bucket, label, byClass: shapeUsage(rows, 'runner_class', from, end), byRepo: shapeUsage(rows, 'repo', from, end) }
          })
        : null,
    [q.data, from, end],
  )
  const byBucket = useMemo(() => bucketTotals(q.data ?? []), [q.data])
  const totals = useMemo(() => {
    const t = { core: 0, pipelines: 0 }
    for (const r of q.data ?? []) {
      t.core += r.core_seconds
      t.pipelines += r.pipelines
    }
    return t
  }, [q.data])
  return (
    <section aria-labelledby="usage-h">
      <h2 id="usage-h">Usage</h2>
      <div className="inline">
        <Field label="From">{(id) => <input id={id} type="date" value={from} max={to} onChange={(e) => e.target.value && setFrom(e.target.value)} />}</Field>
        <Field label="To" hint="Empty: today.">
          {(id, d) => <input id={id} type="date" value={to} min={from} onChange={(e) => setTo(e.target.value)} aria-describedby={d} />}
        </Field>
      </div>
      <p className="muted" data-testid="usage-zone">
        Days run from midnight to midnight in the billing time zone, {zone}.
      </p>
      {q.isPending && <Loading what="Loading usage" />}
      {q.isError && <ErrorBox error={q.error} retry={() => q.refetch()} />}
      {q.data && charts && (
        <>
          <p data-testid="usage-total">
            {totals.pipelines} {totals.pipelines === 1 ? 'pipeline' : 'pipelines'}, <strong>{coreHours(totals.core)}</strong> settled in this period.
          </p>
          {charts.map((c) => {
            const t = byBucket[c.bucket]
            return (
              <section key={c.bucket} data-bucket={c.bucket} aria-labelledby={`usage-${c.bucket}-h`}>
                <h3 id={`usage-${c.bucket}-h`}>{c.label}</h3>
                <p className="muted zone">Days in {zone}</p>
                <p className="muted" data-testid={`usage-${c.bucket}`}>
                  {t.pipelines} {t.pipelines === 1 ? 'pipeline' : 'pipelines'}, {coreHours(t.core_seconds)}
                  {t.quota_core_seconds > 0 ? `, ${coreHours(t.quota_core_seconds)} of them from the free ${c.bucket} quota` : ''}
                </p>
                <div className="charts">
                  <StackedBars data={c.byClass} title={`${c.label}: core-hours per day by runner class`} />
                  <StackedBars data={c.byRepo} title={`${c.label}: core-hours per day by repo`} />
                </div>
              </section>
            )
          })}
        </>
      )}
    </section>
  )
}

function Ledger({ org, currency }: { org: string; currency: string }) {
  const q = useInfiniteQuery({
    queryKey: keys.billing.ledger(org),
    queryFn: ({ pageParam }) => endpoints.billing.ledger(org, pageParam),
    initialPageParam: '',
    getNextPageParam: (p) => p.next_cursor,
  })
  const rows = q.data?.pages.flatMap((p) => p.items) ?? []
  return (
    <section aria-labelledby="ledger-h">
      <h2 id="ledger-h">Ledger</h2>
      {q.isPending ? (
        <Loading what="Loading the ledger" />
      ) : q.isError ? (
        <ErrorBox error={q.error} retry={() => q.refetch()} />
      ) : rows.length === 0 ? (
        <Empty>No money has moved yet.</Empty>
      ) : (
        <div className="tablewrap">
          <table aria-label="Ledger">
            <thead>
              <tr>
                <th scope="col">When</th>
                <th scope="col">Kind</th>
                <th scope="col" className="num">
                  Amount
                </th>
                <th scope="col" className="num">
                  Written off
                </th>
                <th scope="col" className="num">
                  Balance change
                </th>
                <th scope="col" className="num">
                  Frozen change
                </th>
                <th scope="col">Pipeline</th>
                <th scope="col">Note</th>
              </tr>
            </thead>
            <tbody>
              {rows.map((e) => (
                <tr key={e.id}>
                  <td>{dateTime(e.created_at)}</td>
                  <td>{e.kind}</td>
                  <td className="num">{money(e.amount, currency)}</td>
                  <td className="num">{Number(e.written_off) > 0 ? money(e.written_off, currency) : '—'}</td>
                  <td className="num">{money(e.balance_change, currency)}</td>
                  <td className="num">{money(e.frozen_change, currency)}</td>
                  <td>
                    <LedgerPipeline entry={e} />
                  </td>
                  <td>{e.note}</td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
      {q.hasNextPage && (
        <button type="button" className="secondary" onClick={() => q.fetchNextPage()} disabled={q.isFetchingNextPage}>
          {q.isFetchingNextPage ? 'Loading…' : 'Load more'}
        </button>
      )}
    </section>
  )
}

/** The entry's pipeline: a link to its build page while its repo exists ("ml/trainer #12 ·
 * pipeline 34"), its id alone once the repo is deleted, a dash for entries of no pipeline. */
function LedgerPipeline({ entry: e }: { entry: LedgerEntry }) {
  if (e.pipeline_id == null) return <>—</>
  const slash = e.repo?.indexOf('/') ?? -1
  if (e.repo == null || e.build_number == null || slash < 0) return <>pipeline {e.pipeline_id}</>
  const path = repoPath(e.repo.slice(0, slash), e.repo.slice(slash + 1))
  return (
    <Link to={`${path}/builds/${e.build_number}?pipeline=${e.pipeline_id}`} data-testid="ledger-pipeline">
      {e.repo} #{e.build_number} · pipeline {e.pipeline_id}
    </Link>
  )
}

function Statements({ org, month, zone }: { org: string; month: string; zone: string }) {
  const [m, setM] = useState(month)
  return (
    <section className="card" aria-labelledby="stmt-h">
      <h2 id="stmt-h">Statements</h2>
      <div className="inline">
        <Field label="Month" hint={`A calendar month in ${zone}.`}>
          {(id, d) => <input id={id} type="month" value={m} onChange={(e) => setM(e.target.value)} aria-describedby={d} />}
        </Field>
        <a className="button secondary" href={endpoints.billing.statementUrl(org, m)} download={`${org}-${m}.csv`}>
          Download CSV
        </a>
      </div>
    </section>
  )
}

function Notifications({ org }: { org: string }) {
  const q = useQuery({ queryKey: keys.billing.notifications(org), queryFn: () => endpoints.billing.notifications(org) })
  return (
    <section aria-labelledby="alerts-h">
      <h2 id="alerts-h">Recent alerts</h2>
      <QueryView q={q} what="Loading alerts">
        {(p) =>
          p.items.length === 0 ? (
            <Empty>No alerts.</Empty>
          ) : (
            <ul className="list">
              {p.items.map((n) => (
                <li key={n.id} className="row">
                  <span>
                    <strong>{n.kind}</strong> {n.message}
                  </span>
                  <span className="muted">
                    {dateTime(n.created_at)} · {n.delivered ? 'delivered' : 'not delivered'}
                  </span>
                </li>
              ))}
            </ul>
          )
        }
      </QueryView>
    </section>
  )
}

export default function Billing() {
  const { org = '' } = useParams()
  const [params, setParams] = useSearchParams()
  const topup = params.get('topup')
  const q = useQuery({
    queryKey: keys.billing.account(org),
    queryFn: () => endpoints.billing.get(org),
    // After a payment Stripe's webhook credits the balance within moments: poll for a while.
    refetchInterval: topup === 'success' ? 3000 : 30_000,
  })
  useEffect(() => {
    if (topup !== 'success') return
    const t = setTimeout(() => setParams({}, { replace: true }), 60_000)
    return () => clearTimeout(t)
  }, [topup, setParams])
  return (
    <section>
      <h1>Billing of {org}</h1>
      {topup === 'success' && (
        <Notice kind="success">Thank you: the payment went through. The balance grows as soon as Stripe confirms it (usually within seconds).</Notice>
      )}
      {topup === 'cancelled' && <Notice kind="warn">The top-up was cancelled; nothing was charged.</Notice>}
      <QueryView q={q} what="Loading the billing account">
        {(a) => (
          <>
            <Summary a={a} />
            <UsageCharts org={org} month={a.month} zone={a.time_zone} />
            <div className="grid2 top">
              <TopUp org={org} a={a} />
              <Statements org={org} month={a.month} zone={a.time_zone} />
            </div>
            <PricingPanel />
            <Settings org={org} a={a} />
            <Ledger org={org} currency={a.currency} />
            <Notifications org={org} />
          </>
        )}
      </QueryView>
    </section>
  )
}
