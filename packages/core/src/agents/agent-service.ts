import { err, ok, type Result } from 'neverthrow'
import {
  type Agent,
  type AgentInput,
  type AgentUpdate,
  agentInputSchema,
  agentPatchOf,
  agentPatchSchema,
  type HandoffConfig,
  type RoutingConfig,
} from '../domain/agent.js'
import { type SwitchboardError, switchboardError } from '../domain/errors.js'
import { type FieldProblem, parseInput } from '../domain/parse-input.js'
import type { Clock } from '../ports/clock.js'
import type { KnowledgeIndex } from '../ports/knowledge-index.js'
import type { Page, PageRequest, Repositories, Storage } from '../ports/storage.js'

export interface AgentServiceOptions {
  readonly storage: Storage
  readonly clock: Clock
  /**
   * Where the agents' knowledge passages are searched. Given, deleting an agent deletes its
   * knowledge base too (documents and passages); without it they stay, unreachable.
   */
  readonly knowledge?: KnowledgeIndex
}

/** The agents of a company. Every call names the company; another company's agent is not found. */
export interface AgentService {
  /**
   * Applies the defaults of `agentInputSchema`; targets and routes must name agents of the
   * company.
   */
  create(companyId: number, input: AgentInput): Promise<Result<Agent, SwitchboardError>>
  get(companyId: number, id: number): Promise<Result<Agent, SwitchboardError>>
  /** Oldest first. */
  list(companyId: number, page: PageRequest): Promise<Page<Agent>>
  /**
   * Fields sent replace theirs; within `handoff` (and its `msgplatform`) and `routingConfig`, only
   * the fields sent change.
   */
  update(companyId: number, id: number, patch: AgentUpdate): Promise<Result<Agent, SwitchboardError>>
  /**
   * `CONFLICT` while an integration enters through the agent or another agent names it. Its
   * knowledge base goes with it (see `knowledge` in the options).
   */
  delete(companyId: number, id: number): Promise<Result<null, SwitchboardError>>
}

const notFound = () => switchboardError('NOT_FOUND', 'agent not found')
const referenced = () =>
  switchboardError(
    'CONFLICT',
    'the agent is the entry agent of an integration or a handoff or routing target of another agent',
  )

/** Every agent id a configuration names, with the field that names it. */
function agentReferences(config: {
  handoff?: Pick<HandoffConfig, 'allowedTargets'> | undefined
  routingConfig?: Pick<RoutingConfig, 'routes'> | null | undefined
}): { path: string; agentId: number }[] {
  const references = (config.handoff?.allowedTargets ?? []).map((agentId, index) => ({
    path: `handoff.allowedTargets.${index}`,
    agentId,
  }))
  for (const [index, route] of (config.routingConfig?.routes ?? []).entries()) {
    references.push({ path: `routingConfig.routes.${index}.agentId`, agentId: route.agentId })
  }
  return references
}

/**
 * A reference to an agent of another company is reported exactly like one to no agent at all.
 * Run inside the transaction that writes, so a target cannot vanish between check and write.
 */
async function checkReferences(
  repositories: Repositories,
  companyId: number,
  config: Parameters<typeof agentReferences>[0],
): Promise<Result<null, SwitchboardError>> {
  const references = agentReferences(config)
  if (references.length === 0) return ok(null)
  // Held to the end of the transaction: a delete of a target waits, and then sees this reference.
  const found = await repositories.agents.getMany({
    companyId,
    ids: references.map((reference) => reference.agentId),
    lock: 'share',
  })
  const known = new Set(found.map((agent) => agent.id))
  const problems: FieldProblem[] = references
    .filter((reference) => !known.has(reference.agentId))
    .map((reference) => ({ path: reference.path, message: 'names no agent of this company' }))
  if (problems.length === 0) return ok(null)
  return err(
    switchboardError(
      'VALIDATION_ERROR',
      `unknown agent in ${problems.map((problem) => problem.path).join(', ')}`,
      problems,
    ),
  )
}

export function createAgentService(options: AgentServiceOptions): AgentService {
  const { storage, clock, knowledge } = options

  const deleteAgent = (companyId: number, id: number): Promise<Result<null, SwitchboardError>> =>
    // One transaction, the agent held first: a writer naming it meanwhile (an integration, a
    // handoff target, a reassignment) holds it too, so this waits for that one to commit and
    // then sees the reference, or that one waits and then finds no agent.
    storage.transaction(async (tx): Promise<Result<null, SwitchboardError>> => {
      if ((await tx.agents.get({ companyId, id, lock: 'update' })) === null) return err(notFound())
      if (await tx.agents.isReferenced({ companyId, id })) return err(referenced())
      // Under READ COMMITTED every concurrent delete finds the agent above; only one deletes it.
      if (!(await tx.agents.delete({ companyId, id }))) return err(notFound())
      return ok(null)
    })

  return {
    async create(companyId, input) {
      const parsed = parseInput(agentInputSchema, input, 'agent')
      if (parsed.isErr()) return err(parsed.error)
      const valid = parsed.value
      return storage.transaction(async (tx): Promise<Result<Agent, SwitchboardError>> => {
        const checked = await checkReferences(tx, companyId, valid)
        if (checked.isErr()) return err(checked.error)
        return ok(await tx.agents.create({ ...valid, companyId, at: clock.now() }))
      })
    },

    async get(companyId, id) {
      const agent = await storage.agents.get({ companyId, id })
      return agent === null ? err(notFound()) : ok(agent)
    },

    list: (companyId, page) => storage.agents.list({ companyId, ...page }),

    async update(companyId, id, patch) {
      const parsed = parseInput(agentPatchSchema, patch, 'agent')
      if (parsed.isErr()) return err(parsed.error)
      const valid = parsed.value
      return storage.transaction(async (tx): Promise<Result<Agent, SwitchboardError>> => {
        // Existence first, so a foreign id answers NOT_FOUND whatever the patch names. Held for the
        // edit: the patch is merged into what is read here, so another edit must wait for it.
        const current = await tx.agents.get({ companyId, id, lock: 'edit' })
        if (current === null) return err(notFound())
        const changes = agentPatchOf(current, valid)
        const checked = await checkReferences(tx, companyId, changes)
        if (checked.isErr()) return err(checked.error)
        const agent = await tx.agents.update({ companyId, id, patch: changes, at: clock.now() })
        return agent === null ? err(notFound()) : ok(agent)
      })
    },

    async delete(companyId, id) {
      if (knowledge !== undefined) {
        // Before the agent, so that a failure leaves an agent whose deletion can be asked again,
        // not documents of an agent nobody can name any more. A reference made between this look
        // and the deletion below still refuses it, and the knowledge base is gone by then.
        const agent = await storage.agents.get({ companyId, id })
        if (agent === null) return err(notFound())
        if (await storage.agents.isReferenced({ companyId, id })) return err(referenced())
        await removeKnowledgeBase(storage, knowledge, companyId, id)
      }
      return deleteAgent(companyId, id)
    },
  }
}

/** Every document of the agent, each one's passages first, as the knowledge service removes one. */
async function removeKnowledgeBase(
  storage: Storage,
  knowledge: KnowledgeIndex,
  companyId: number,
  agentId: number,
): Promise<void> {
  // Page by page behind a cursor, which documents deleted before it do not move.
  let cursor: string | undefined
  do {
    const page = await storage.knowledgeDocuments.list({
      companyId,
      agentId,
      limit: 100,
      ...(cursor === undefined ? {} : { cursor }),
    })
    for (const document of page.items) {
      await knowledge.remove({ companyId, documentId: document.id })
      await storage.knowledgeDocuments.delete({ companyId, agentId, id: document.id })
    }
    cursor = page.nextCursor ?? undefined
  } while (cursor !== undefined)
}
