import { ago, calendarDay, clockTime, coreHours, coreSeconds, dateTime, day, duration, intlZone, money, zoneName } from './format'

describe('format', () => {
  it('shows a moment with its time zone, in the one format of the locale', () => {
    const ts = '2026-12-03T16:30:00Z'
    expect(dateTime(ts, { locale: 'en-US', timeZone: 'UTC' })).toBe('Dec 3, 2026, 4:30 PM UTC')
    // Shanghai is past midnight already: the zone says why the date differs.
    expect(dateTime(ts, { locale: 'en-US', timeZone: 'Asia/Shanghai' })).toBe('Dec 4, 2026, 12:30 AM GMT+8')
    expect(dateTime(ts, { locale: 'de-DE', timeZone: 'UTC' })).toBe('3. Dez. 2026, 16:30 UTC')
    expect(dateTime(null)).toBe('—')
  })
  it("reads a server's fixed-offset zone name, and never fails a page on one it cannot read", () => {
    const ts = '2026-12-03T16:30:00Z'
    // Go names a fixed zone "UTC+8"; Intl threw "Invalid time zone specified: UTC+8".
    expect(dateTime(ts, { locale: 'en-US', timeZone: 'UTC+8' })).toBe('Dec 4, 2026, 12:30 AM GMT+8')
    expect(intlZone('UTC-5')).toBe('Etc/GMT+5')
    expect(intlZone('UTC+0')).toBe('UTC')
    expect(intlZone('Mars/Olympus')).toBeUndefined()
    expect(() => dateTime(ts, { locale: 'en-US', timeZone: 'Mars/Olympus' })).not.toThrow()
  })
  it('shows log line times to the second with the zone named once', () => {
    const ms = Date.parse('2026-12-03T16:30:05.250Z')
    expect(clockTime(ms, { timeZone: 'UTC' })).toBe('16:30:05')
    expect(clockTime(ms, { timeZone: 'Asia/Shanghai' })).toBe('00:30:05')
    expect(zoneName({ timeZone: 'UTC' }, ms)).toBe('UTC')
    expect(zoneName({ timeZone: 'Asia/Shanghai' }, ms)).toBe('GMT+8')
  })
  it('writes dates in the locale format, and billing days as the server placed them', () => {
    expect(day('2026-12-03T16:30:00Z', { locale: 'en-US', timeZone: 'UTC' })).toBe('Dec 3, 2026')
    // A billing day is a calendar date in the billing zone: never moved into the browser's.
    expect(calendarDay('2026-12-04', 'en-US')).toBe('Dec 4, 2026')
    expect(calendarDay('2026-12-04', 'de-DE')).toBe('4. Dez. 2026')
    expect(calendarDay('bogus', 'en-US')).toBe('bogus')
  })
  it('uses one unit for usage: core-hours with two decimals, core-seconds only for tooltips', () => {
    expect(coreHours(0)).toBe('0.00 core-hours')
    expect(coreHours(20)).toBe('0.01 core-hours')
    expect(coreHours(3600)).toBe('1.00 core-hours')
    expect(coreHours(572400)).toBe('159.00 core-hours')
    expect(coreHours(5721840)).toBe('1589.40 core-hours')
    expect(coreHours(NaN)).toBe('—')
    expect(coreSeconds(1234.4)).toBe('1234 core-seconds')
  })
  it('always writes money with its currency when it has one', () => {
    expect(money('12.3400', 'CNY')).toBe('12.34 CNY')
    expect(money('0.12345000', 'CNY')).toBe('0.12345 CNY')
    expect(money('8', 'CNY')).toBe('8 CNY')
    expect(money(null, 'CNY')).toBe('—')
  })
  it('writes durations and ages for people', () => {
    expect(duration(65_000)).toBe('1m 5s')
    expect(ago('2026-12-03T16:29:58Z', Date.parse('2026-12-03T16:30:00Z'))).toBe('just now')
  })
})
