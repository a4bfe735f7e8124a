import { type Agent, agentInputSchema, type Storage } from '@switchboard/core'
import { seedChannel } from '@switchboard/core/testing'

/**
 * A channel whose entry agent may hand off to a human agent, announcing it and asking the platform
 * for group 7 without a system message: the setup of the transfer-to-a-human durability tests.
 */
export async function seedHandoffToHuman(storage: Storage, at: Date) {
  const seeded = await seedChannel(storage)
  const { companyId, agent: reception } = seeded
  const human: Agent = await storage.agents.create({
    ...agentInputSchema.parse({ name: 'Humans', kind: 'human' }),
    companyId,
    at,
  })
  await storage.agents.update({
    companyId,
    id: reception.id,
    patch: {
      handoff: {
        ...reception.handoff,
        enabled: true,
        allowedTargets: [human.id],
        handoffMessageTemplate: 'A colleague will take over.',
        msgplatform: { targetGroupId: 7, sendSystemMessage: false },
      },
    },
    at,
  })
  return { ...seeded, human }
}
