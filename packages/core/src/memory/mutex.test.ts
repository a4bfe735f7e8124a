import { describe, expect, it } from 'vitest'
import { createMutex } from './mutex.js'

describe('the mutex', () => {
  it('starts a task at once when nothing holds it, and holds it from that moment', async () => {
    const mutex = createMutex()
    let started = false
    let freeInside: boolean | undefined
    const done = mutex.run(async () => {
      started = true
      freeInside = mutex.isFree()
    })
    expect(started).toBe(true)
    expect(freeInside).toBe(false)
    await done
    expect(mutex.isFree()).toBe(true)
  })

  it('runs queued tasks one at a time, in arrival order, past a failing one', async () => {
    const mutex = createMutex()
    const events: string[] = []
    const task =
      (name: string, fail = false) =>
      async () => {
        events.push(`${name} start`)
        await new Promise((resolve) => setTimeout(resolve, 1))
        events.push(`${name} end`)
        if (fail) throw new Error(name)
      }
    const results = await Promise.allSettled([
      mutex.run(task('a')),
      mutex.run(task('b', true)),
      mutex.run(task('c')),
    ])
    expect(results.map((result) => result.status)).toEqual(['fulfilled', 'rejected', 'fulfilled'])
    expect(events).toEqual(['a start', 'a end', 'b start', 'b end', 'c start', 'c end'])
    expect(mutex.isFree()).toBe(true)
  })

  it('makes a task queued while the first one starts wait for it, like any other', async () => {
    const mutex = createMutex()
    const events: string[] = []
    let inner: Promise<void> | undefined
    await mutex.run(async () => {
      events.push('outer start')
      // Queued before the outer task's first await: it must still wait for the outer one.
      inner = mutex.run(async () => {
        events.push('inner')
      })
      await new Promise((resolve) => setTimeout(resolve, 1))
      events.push('outer end')
    })
    await inner
    expect(events).toEqual(['outer start', 'outer end', 'inner'])
  })

  it('turns a task that throws before returning its promise into a rejection, and stays usable', async () => {
    const mutex = createMutex()
    const throwing = (() => {
      throw new Error('at once')
    }) as () => Promise<void>
    await expect(mutex.run(throwing)).rejects.toThrow('at once')
    await expect(mutex.run(async () => 'next')).resolves.toBe('next')
  })
})
