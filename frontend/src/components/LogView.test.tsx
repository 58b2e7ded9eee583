import { act, fireEvent, render, screen, waitFor } from '@testing-library/react'
import { LogLines, LogView, ROW_HEIGHT, WRAP_KEY, estimateHeight } from './LogView'
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

  it('jumps when the #L… of the URL changes on a complete log', () => {
    const b = bigBuffer(40_000)
    const { container } = render(<LogLines buffer={b} version={1} follow={false} onFollowChange={noop} query="" matches={[]} current={-1} height={400} />)
    const el = container.querySelector('.logview') as HTMLElement
    expect(el.scrollTop).toBe(0)
    act(() => {
      history.replaceState(null, '', '#L20000')
      window.dispatchEvent(new HashChangeEvent('hashchange'))
    })
    expect(Math.abs(el.scrollTop - (20_000 * ROW_HEIGHT - 200))).toBeLessThan(ROW_HEIGHT)
    expect(container.querySelector('[data-line="20000"]')!.className).toContain('sel')
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

/** Lays the drawn log rows out as a browser would: line n is tall(n) px (jsdom lays out nothing). */
function layOut(tall: (n: number) => number) {
  const d = Object.getOwnPropertyDescriptor(HTMLElement.prototype, 'offsetHeight')!
  Object.defineProperty(HTMLElement.prototype, 'offsetHeight', {
    configurable: true,
    get(this: HTMLElement) {
      return this.classList.contains('ln') ? tall(Number(this.dataset.line)) : 0
    },
  })
  return () => Object.defineProperty(HTMLElement.prototype, 'offsetHeight', d)
}

describe('LogLines, wrapped', () => {
  let restore = () => {}
  afterEach(() => {
    restore()
    history.replaceState(null, '', '/')
  })

  it('places each row below the measured height of the one before', () => {
    restore = layOut((n) => (n === 2 ? 3 * ROW_HEIGHT : ROW_HEIGHT))
    const b = new LogBuffer()
    b.append('one\n' + 'a long line '.repeat(40) + '\nthree\nfour\n')
    const { container } = render(<LogLines buffer={b} version={1} follow={false} onFollowChange={noop} query="" matches={[]} current={-1} height={400} wrap />)
    expect(container.querySelector('.logview')!.className).toContain('wrap')
    const top = (n: number) => (container.querySelector(`[data-line="${n}"]`) as HTMLElement).style.top
    expect(top(2)).toBe(`${ROW_HEIGHT}px`)
    expect(top(3)).toBe(`${4 * ROW_HEIGHT}px`)
    expect(top(4)).toBe(`${5 * ROW_HEIGHT}px`)
    expect((container.querySelector('.logspace') as HTMLElement).style.height).toBe(`${6 * ROW_HEIGHT}px`)
  })

  it('keeps a linked line where it jumped to while the rows above it are measured', () => {
    // Lines 590–599 wrap to five rows each: the jump to line 600 was laid out with one apiece.
    restore = layOut((n) => (n >= 590 && n < 600 ? 5 * ROW_HEIGHT : ROW_HEIGHT))
    history.replaceState(null, '', '#L600')
    const b = bigBuffer(1000)
    const { container } = render(<LogLines buffer={b} version={1} follow={false} onFollowChange={noop} query="" matches={[]} current={-1} height={400} wrap />)
    const el = container.querySelector('.logview') as HTMLElement
    const line = container.querySelector('[data-line="600"]') as HTMLElement
    // Centred: 200 px down the 400 px view, less half its own height.
    expect(parseFloat(line.style.top) - el.scrollTop).toBe(200 - ROW_HEIGHT / 2)
    expect(el.scrollTop).toBe(599 * ROW_HEIGHT + 10 * 4 * ROW_HEIGHT - 200 + ROW_HEIGHT / 2)
    expect(line.className).toContain('sel')
  })

  it('follows the end when the last lines turn out taller than laid out', () => {
    restore = layOut((n) => (n > 1000 ? 4 * ROW_HEIGHT : ROW_HEIGHT))
    const b = bigBuffer(1000)
    const { container, rerender } = render(<LogLines buffer={b} version={1} follow={true} onFollowChange={noop} query="" matches={[]} current={-1} height={400} wrap />)
    const el = container.querySelector('.logview') as HTMLElement
    b.append('x'.repeat(500) + '\n' + 'y'.repeat(500) + '\n')
    rerender(<LogLines buffer={b} version={2} follow={true} onFollowChange={noop} query="" matches={[]} current={-1} height={400} wrap />)
    expect(el.scrollTop).toBe(1000 * ROW_HEIGHT + 2 * 4 * ROW_HEIGHT)
    expect(container.querySelector('[data-line="1002"]')).not.toBeNull()
  })

  it('estimates an unmeasured line by its visible characters', () => {
    expect(estimateHeight('short', 80)).toBe(ROW_HEIGHT)
    expect(estimateHeight('x'.repeat(161), 80)).toBe(3 * ROW_HEIGHT)
    // Colour escapes take no room.
    expect(estimateHeight('\x1b[31m' + 'x'.repeat(80) + '\x1b[0m', 80)).toBe(ROW_HEIGHT)
    // Width unknown yet: one row.
    expect(estimateHeight('x'.repeat(500), 0)).toBe(ROW_HEIGHT)
  })
})

describe('LogView', () => {
  afterEach(() => {
    vi.unstubAllGlobals()
    localStorage.clear()
  })

  function serveLog() {
    vi.stubGlobal(
      'fetch',
      vi.fn(async (url: string) => {
        if (url.includes('/log/times')) return new Response(JSON.stringify({ marks: [] }), { status: 200 })
        return new Response('error: ' + 'the end of this line matters '.repeat(20) + '\nok\n', { status: 200, headers: { 'X-Log-Complete': 'true' } })
      }),
    )
  }

  it('wraps lines by default and remembers when the user turns it off', async () => {
    serveLog()
    const first = render(<LogView jobId={7} />)
    await waitFor(() => expect(first.container.querySelector('[data-line="2"]')).not.toBeNull())
    const box = screen.getByRole('checkbox', { name: /Wrap lines/ }) as HTMLInputElement
    expect(box.checked).toBe(true)
    expect(first.container.querySelector('.logview')!.className).toContain('wrap')
    fireEvent.click(box)
    expect(box.checked).toBe(false)
    expect(first.container.querySelector('.logview')!.className).not.toContain('wrap')
    expect(localStorage.getItem(WRAP_KEY)).toBe('false')
    first.unmount()

    const again = render(<LogView jobId={8} />)
    await waitFor(() => expect(again.container.querySelector('[data-line="2"]')).not.toBeNull())
    expect((screen.getByRole('checkbox', { name: /Wrap lines/ }) as HTMLInputElement).checked).toBe(false)
    expect(again.container.querySelector('.logview')!.className).not.toContain('wrap')
  })
})
