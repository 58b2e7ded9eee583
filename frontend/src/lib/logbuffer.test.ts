import { LogBuffer } from './logbuffer'
import { plainText } from './ansi'

describe('LogBuffer', () => {
  it('joins chunks that split lines', () => {
    const b = new LogBuffer()
    b.append('first li')
    expect(b.count).toBe(1)
    b.append('ne\nsecond\n')
    expect(b.count).toBe(2)
    expect(b.lines.slice(0, 2)).toEqual(['first line', 'second'])
    b.append('\nthird')
    expect(b.count).toBe(4)
    expect(b.lines[2]).toBe('')
    expect(b.lines[3]).toBe('third')
  })

  it('is empty until something is written', () => {
    const b = new LogBuffer()
    expect(b.count).toBe(0)
    b.append('')
    expect(b.count).toBe(0)
  })

  it('finds lines by their visible text', () => {
    const b = new LogBuffer()
    b.append('ok\n\x1b[31mERR\x1b[0mOR here\nfine\nan error\n')
    expect(b.search('error', plainText)).toEqual([1, 3])
    expect(b.search('', plainText)).toEqual([])
    expect(b.search('[31m', plainText)).toEqual([])
  })
})
