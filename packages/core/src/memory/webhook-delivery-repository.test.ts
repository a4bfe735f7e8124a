import { describe, expect, it } from 'vitest'
import { WEBHOOK_DELIVERIES_KEPT_MS } from '../domain/webhook-log.js'
import { createJournal, type Statement } from './undo-log.js'
import { createWebhookDeliveryRepository, createWebhookDeliveryTable } from './webhook-delivery-repository.js'

/** Each call alone, committed at once, as the storage runs calls outside a transaction. */
const alone: Statement = async (body) => {
  const journal = createJournal()
  const result = body(journal)
  journal.commit()
  return result
}

describe('the memory storage of webhook delivery ids', () => {
  // A counter shared by all integrations decided when to trim: two integrations recording in turn
  // left one of them with only odd numbers, and its expired ids were never deleted.
  it("deletes every integration's expired ids, whatever the others record in between", async () => {
    const table = createWebhookDeliveryTable()
    const deliveries = createWebhookDeliveryRepository({ webhookDeliveries: table, statement: alone })
    const start = Date.parse('2026-01-01T00:00:00.000Z')
    const stepMs = WEBHOOK_DELIVERIES_KEPT_MS / 100

    for (let index = 0; index < 1000; index += 1) {
      const at = new Date(start + index * stepMs)
      await deliveries.record({ integrationId: '1', deliveryId: `first-${index}`, at })
      await deliveries.record({ integrationId: '2', deliveryId: `second-${index}`, at })
    }

    // The ids of the last 100 steps are still kept; the rest expired long ago.
    for (const integrationId of ['1', '2']) {
      expect(table.byIntegration.get(integrationId)!.size).toBeLessThanOrEqual(101 + 64)
    }
  })

  // V8 leaves a deleted Map entry as a hole that every walk from the start passes over until the
  // table is rebuilt: trimming on each record walked the holes of the ids trimmed before it, so a
  // record cost the ids kept (100,000 kept: 30 µs a record, 20 times the trim every 64th).
  it("walks an integration's ids to trim them about once every 64 of its records, not on each", async () => {
    const table = createWebhookDeliveryTable()
    const deliveries = createWebhookDeliveryRepository({ webhookDeliveries: table, statement: alone })
    const start = Date.parse('2026-01-01T00:00:00.000Z')
    const stepMs = WEBHOOK_DELIVERIES_KEPT_MS / 1000
    for (let index = 0; index < 1000; index += 1) {
      await deliveries.record({
        integrationId: '1',
        deliveryId: `warm-${index}`,
        at: new Date(start + index * stepMs),
      })
    }
    const received = table.byIntegration.get('1')!
    const iterate = received[Symbol.iterator]
    let walks = 0
    received[Symbol.iterator] = function (this: Map<string, number>) {
      walks += 1
      return iterate.call(this)
    }

    for (let index = 1000; index < 1000 + 6400; index += 1) {
      await deliveries.record({
        integrationId: '1',
        deliveryId: `id-${index}`,
        at: new Date(start + index * stepMs),
      })
    }

    expect(walks).toBeLessThanOrEqual(101)
    expect(received.size).toBeLessThanOrEqual(1001 + 64)
  })
})
