import { useQuery } from '@tanstack/react-query'
import { endpoints } from '../lib/endpoints'
import type { PricedClass, Pricing } from '../lib/types'
import { money } from '../lib/format'
import { QueryView } from './ui'
import { keys } from '../lib/keys'

/** The installation's prices, fetched once and shared by every page that shows money. */
export function usePricing() {
  return useQuery({ queryKey: keys.pricing(), queryFn: endpoints.pricing, staleTime: 5 * 60_000 })
}

/** The billing currency, for money whose answer does not carry it (costs of pipelines). */
export function useCurrency(): string {
  return usePricing().data?.currency ?? ''
}

/** A class's size in words: "1–64 (8 by default)" or "16, fixed". */
export function coresText(c: PricedClass): string {
  if (c.fixed_cores > 0) return `${c.fixed_cores}, fixed`
  return `${c.min_cores}–${c.max_cores} (${c.default_cores} by default)`
}

export function gpuText(c: PricedClass): string {
  if (!c.gpu) return 'none'
  const model = c.gpu === 'any' ? 'any model' : c.gpu
  return `${model}, ${c.gpu_memory_gb} GB`
}

/** The pricing table and its rules, from GET /pricing. */
export function PricingTable({ p }: { p: Pricing }) {
  return (
    <>
      <div className="tablewrap">
        <table aria-label="Prices per runner class">
          <thead>
            <tr>
              <th scope="col">Runner class</th>
              <th scope="col">Cores</th>
              <th scope="col">Memory</th>
              <th scope="col">GPU</th>
              <th scope="col" className="num">
                Per core-hour
              </th>
              <th scope="col" className="num">
                Per hour
              </th>
              <th scope="col">Free quota</th>
            </tr>
          </thead>
          <tbody>
            {p.classes.map((c) => (
              <tr key={c.class} data-class={c.class}>
                <td>
                  <code>{c.class}</code>
                </td>
                <td>{coresText(c)}</td>
                <td>{c.memory_gib_per_core} GiB per core</td>
                <td>{gpuText(c)}</td>
                <td className="num" data-testid="per-core-hour">
                  {money(c.price_per_core_hour, p.currency)}
                </td>
                <td className="num" title={`at ${c.hour_cores} cores`}>
                  {money(c.price_per_hour, p.currency)} <span className="muted">at {c.hour_cores} cores</span>
                </td>
                <td>{c.free_quota ? 'yes, first' : 'no'}</td>
              </tr>
            ))}
          </tbody>
        </table>
      </div>
      <p data-testid="free-quota-rule">
        Every team gets {p.free_core_hours} free CPU core-hours for builds and {p.free_workspace_core_hours} for workspaces each calendar month; GPU time is never free. {p.team_runners.note}
      </p>
      <p data-testid="freeze-rule">{p.freeze_rule}</p>
      <p className="muted" data-testid="pricing-zone">
        Months begin at midnight in the billing time zone, {p.time_zone}.
      </p>
    </>
  )
}

/** The pricing panel of the Billing and runner pages. */
export function PricingPanel() {
  const q = usePricing()
  return (
    <section className="card" aria-labelledby="pricing-h" data-testid="pricing">
      <h2 id="pricing-h">Pricing</h2>
      <QueryView q={q} what="Loading the prices">
        {(p) => <PricingTable p={p} />}
      </QueryView>
    </section>
  )
}
