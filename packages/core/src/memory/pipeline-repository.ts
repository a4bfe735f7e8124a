import type { Pipeline, PipelineRepository } from '../ports/storage.js'
import { snapshot } from './snapshot.js'
import type { Statement } from './undo-log.js'

export interface PipelineTable {
  /** Each company's pipelines in creation order. */
  readonly byCompany: Map<number, readonly Pipeline[]>
  /** Like database sequences, not taken back by a rollback. */
  lastPipelineId: number
  lastStageId: number
}

export function createPipelineTable(): PipelineTable {
  return { byCompany: new Map(), lastPipelineId: 0, lastStageId: 0 }
}

export function createPipelineRepository(options: {
  pipelines: PipelineTable
  statement: Statement
}): PipelineRepository {
  const { pipelines, statement } = options

  return {
    create: ({ companyId, name, isDefault, stages }) =>
      statement((log) => {
        pipelines.lastPipelineId += 1
        const pipeline = snapshot<Pipeline>({
          id: String(pipelines.lastPipelineId),
          name,
          isDefault,
          stages: stages.map((stageName, position) => {
            pipelines.lastStageId += 1
            return { id: String(pipelines.lastStageId), name: stageName, position }
          }),
        })
        log.set(pipelines.byCompany, companyId, [...(pipelines.byCompany.get(companyId) ?? []), pipeline])
        return pipeline
      }),

    list: ({ companyId }) => statement(() => [...(pipelines.byCompany.get(companyId) ?? [])]),
  }
}
