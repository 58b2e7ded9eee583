import { act, fireEvent, render } from '@testing-library/react'
import { LogLines, ROW_HEIGHT } from './LogView'
import { LogBuffer } from '../lib/logbuffer'

function bigBuffer(n: number): LogBuffer {
  const b = new LogBuffer()
  const parts: string[] = []
  for (let i = 1; i <= n; i++) parts.push(i % 1000 === 0 ? `\x1b[31mline ${i} error\x1b[0m` : `line ${i}`)
  b.append(parts.join('\n') + '\n')
  return b
}

const noop = () => {}

describe('LogLines', () => {
  afterEach(() => history.replaceState(null, '', '/'))

  it('renders only the visible lines of a huge log', () => {
    const b = bigBuffer(200_000)
    const { container } = render(<LogLines buffer={b} version={1} follow={false} onFollowChange={noop} query="" matches={[]} current={-1} height={400} />)
    const rows = container.querySelectorAll('.ln')
    // 400 px / 20 px = 20 rows, plus the overscan below: never the whole log.
    expect(rows.length).toBeGreaterThan(10)
    expect(rows.length).toBeLessThan(60)
    expect(rows[0].querySelector('.num')!.textContent).toBe('1')
    expect((container.querySelector('.logspace') as HTMLElement).style.height).toBe(`${200_000 * ROW_HEIGHT}px`)
    expect(container.querySelector('.logview')!.getAttribute('data-lines')).toBe('200000')
  })

  it('draws ANSI colours and line links', () => {
    const b = new LogBuffer()
    b.append('plain\n\x1b[1;32mgreen\x1b[0m ok\n')
    const { container } = render(<LogLines buffer={b} version={1} follow={false} onFollowChange={noop} query="" matches={[]} current={-1} height={400} />)
    const green = container.querySelector('.af2.a-b')
    expect(green?.textContent).toBe('green')
    const link = container.querySelector('[data-line="2"] a.num') as HTMLAnchorElement
    expect(link.getAttribute('href')).toBe('#L2')
    fireEvent.click(link)
    expect(location.hash).toBe('#L2')
    expect(container.querySelector('[data-line="2"]')!.className).toContain('sel')
  })

  it('scrolls to the current search match and marks it', () => {
    const b = bigBuffer(50_000)
    const matches = [999, 1999]
    const { container } = render(<LogLines buffer={b} version={1} follow={false} onFollowChange={noop} query="error" matches={matches} current={1} height={400} />)
    const el = container.querySelector('.logview') as HTMLElement
    expect(el.scrollTop).toBeGreaterThan(1990 * ROW_HEIGHT - 400)
    act(() => {
      fireEvent.scroll(el)
    })
    const hit = container.querySelector('[data-line="2000"]')
    expect(hit).not.toBeNull()
    expect(hit!.className).toContain('hit')
    expect(hit!.querySelector('mark')?.textContent).toBe('error')
  })

  it('jumps to a linked line (#L…) when it arrives and leaves follow mode', () => {
    history.replaceState(null, '', '#L30000')
    const follow = vi.fn()
    const b = bigBuffer(40_000)
    const { container } = render(<LogLines buffer={b} version={1} follow={true} onFollowChange={follow} query="" matches={[]} current={-1} height={400} />)
    const el = container.querySelector('.logview') as HTMLElement
    expect(Math.abs(el.scrollTop - (30_000 * ROW_HEIGHT - 200))).toBeLessThan(ROW_HEIGHT)
    expect(follow).toHaveBeenCalledWith(false)
  })

  it('follows the end of a growing log', () => {
    const b = bigBuffer(1000)
    const { container, rerender } = render(<LogLines buffer={b} version={1} follow={true} onFollowChange={noop} query="" matches={[]} current={-1} height={400} />)
    const el = container.querySelector('.logview') as HTMLElement
    b.append('more\n'.repeat(500))
    rerender(<LogLines buffer={b} version={2} follow={true} onFollowChange={noop} query="" matches={[]} current={-1} height={400} />)
    // jsdom does not clamp scrollTop: it is set to the full height.
    expect(el.scrollTop).toBe(1500 * ROW_HEIGHT)
  })
})
