/**
 * A team whose receptionist may hand off to a human agent, announcing it and asking the platform for
 * group 7 without a system message: the setup of the transfer-to-a-human tests.
 */
export const humanTeam = {
  reception: {
    handoff: {
      enabled: true,
      allowedTargets: ['humans'],
      handoffMessageTemplate: 'A colleague will take over.',
      msgplatform: { targetGroupId: 7, sendSystemMessage: false },
    },
  },
  humans: { kind: 'human' as const },
}
