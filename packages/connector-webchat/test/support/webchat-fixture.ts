import { afterAll, afterEach, beforeAll } from 'vitest'
import { type Service, startService } from './start-service.js'
import { connectVisitor, type Visitor } from './visitor.js'

export interface WebchatFixture {
  readonly service: Service
  readonly agentId: number
  readonly integrationId: string
  /** A visitor connected to the fixture's integration, closed after the test. */
  visit(token?: string): Promise<Visitor>
  /** A visitor connected to any socket URL, closed after the test. */
  connect(url: string): Promise<Visitor>
}

/**
 * One reference server per test file with a webchat integration entering through one agent;
 * visitors are closed and the model script checked after every test. Call at the top of a file.
 */
export function useWebchatFixture(): WebchatFixture {
  let service: Service | undefined
  let agentId = 0
  let integrationId = ''
  const visitors: Visitor[] = []

  beforeAll(async () => {
    service = await startService()
    agentId = await service.createAgent({ name: 'Concierge' })
    integrationId = await service.createWebchat({ entryAgentId: agentId })
  })
  afterEach(async () => {
    await Promise.all(visitors.splice(0).map((visitor) => visitor.close()))
    service?.model.assertDone()
  })
  afterAll(async () => {
    await service?.close()
  })

  return {
    get service() {
      if (service === undefined) throw new Error('the webchat fixture is used before it started')
      return service
    },
    get agentId() {
      return agentId
    },
    get integrationId() {
      return integrationId
    },
    async connect(url) {
      const visitor = await connectVisitor(url)
      visitors.push(visitor)
      return visitor
    },
    visit(token) {
      return this.connect(this.service.socketUrl(integrationId, token))
    },
  }
}
