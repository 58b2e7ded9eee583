import { niceTicks, type ChartData } from '../lib/charts'
import { coreHours } from '../lib/format'

const COLORS = ['#3b82f6', '#f59e0b', '#10b981', '#ef4444', '#8b5cf6', '#64748b']

/** A stacked bar chart of core-hours per day, hand-drawn in SVG, with its data as a table for screen readers. */
export function StackedBars({ data, title }: { data: ChartData; title: string }) {
  const W = 640
  const H = 220
  const pad = { l: 44, r: 8, t: 10, b: 26 }
  const ticks = niceTicks(data.max)
  const top = ticks[ticks.length - 1] || 1
  const n = Math.max(1, data.days.length)
  const bw = (W - pad.l - pad.r) / n
  const y = (v: number) => pad.t + (H - pad.t - pad.b) * (1 - v / top)
  const labelEvery = Math.ceil(n / 8)
  return (
    <figure className="chart">
      <figcaption>{title}</figcaption>
      {data.series.length === 0 ? (
        <p className="empty">No settled usage in this period.</p>
      ) : (
        <>
          <svg viewBox={`0 0 ${W} ${H}`} role="img" aria-label={`${title}: bar chart`} preserveAspectRatio="none">
            {ticks.map((t) => (
              <g key={t}>
                <line x1={pad.l} x2={W - pad.r} y1={y(t)} y2={y(t)} className="gridline" />
                <text x={pad.l - 6} y={y(t) + 4} textAnchor="end" className="axis">
                  {t}
                </text>
              </g>
            ))}
            {data.days.map((d, i) => {
              let acc = 0
              return (
                <g key={d}>
                  {data.series.map((s, si) => {
                    const v = s.values[i]
                    if (!v) return null
                    const y1 = y(acc + v)
                    const h = y(acc) - y1
                    acc += v
                    return (
                      <rect key={s.key} x={pad.l + i * bw + bw * 0.12} width={bw * 0.76} y={y1} height={Math.max(h, 0.5)} fill={COLORS[si % COLORS.length]}>
                        <title>{`${d} · ${s.key}: ${v.toFixed(2)} core-hours`}</title>
                      </rect>
                    )
                  })}
                  {i % labelEvery === 0 && (
                    <text x={pad.l + i * bw + bw / 2} y={H - 8} textAnchor="middle" className="axis">
                      {d.slice(5)}
                    </text>
                  )}
                </g>
              )
            })}
          </svg>
          <ul className="legend">
            {data.series.map((s, si) => (
              <li key={s.key}>
                <span className="swatch" style={{ background: COLORS[si % COLORS.length] }} aria-hidden="true" /> {s.key} <span className="muted">{coreHours(Math.round(s.total * 3600))}</span>
              </li>
            ))}
          </ul>
          <table className="visually-hidden">
            <caption>{title}</caption>
            <thead>
              <tr>
                <th scope="col">Day</th>
                {data.series.map((s) => (
                  <th key={s.key} scope="col">
                    {s.key}
                  </th>
                ))}
              </tr>
            </thead>
            <tbody>
              {data.days.map((d, i) => (
                <tr key={d}>
                  <th scope="row">{d}</th>
                  {data.series.map((s) => (
                    <td key={s.key}>{s.values[i].toFixed(2)}</td>
                  ))}
                </tr>
              ))}
            </tbody>
          </table>
        </>
      )}
    </figure>
  )
}
