'use strict'
// autocannon's `setupRequest` for the webhook bench. It runs inside autocannon's worker threads,
// which can load a file but not receive a function, hence a plain CommonJS file. Every request is a
// new customer message (a fresh message_id, so none is a duplicate), signed as the platform would.
const { createHmac, randomUUID } = require('node:crypto')

const secret = process.env.BENCH_WEBHOOK_SECRET ?? ''
const customers = Number(process.env.BENCH_WEBHOOK_CUSTOMERS ?? '200')
// Unique per worker and per run, so warm-up and measured runs never repeat an id.
const run = randomUUID()
let sent = 0

module.exports = function setupRequest(request) {
  sent += 1
  const body = JSON.stringify({
    text: 'Where is my order? It should have arrived by now.',
    client_id: `customer-${sent % customers}`,
    channel_id: 'bench-channel',
    transport: 'telegram',
    message_id: `${run}-${sent}`,
  })
  const signature = `sha256=${createHmac('sha256', secret).update(body).digest('hex')}`
  return {
    ...request,
    body,
    headers: { ...request.headers, 'content-type': 'application/json', 'x-webhook-signature': signature },
  }
}
