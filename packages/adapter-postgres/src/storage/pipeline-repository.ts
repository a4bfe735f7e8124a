import type { Pipeline, PipelineRepository, PipelineStage } from '@switchboard/core'
import type { DbClient, DbRow } from '../db.js'
import { timeParameter, toInteger } from '../sql-values.js'
import { storableJson } from '../storable-text.js'

/** Rows of pipelines joined with their stages, in pipeline then stage order, grouped back. */
function pipelinesOf(rows: readonly DbRow[]): Pipeline[] {
  const pipelines: { id: string; name: string; isDefault: boolean; stages: PipelineStage[] }[] = []
  for (const row of rows) {
    const id = String(row.pipeline_id)
    let pipeline = pipelines.at(-1)
    if (pipeline?.id !== id) {
      pipeline = { id, name: String(row.pipeline_name), isDefault: row.is_default === true, stages: [] }
      pipelines.push(pipeline)
    }
    if (row.stage_id !== null) {
      pipeline.stages.push({
        id: String(row.stage_id),
        name: String(row.stage_name),
        position: toInteger(row.position),
      })
    }
  }
  return pipelines
}

export function createPipelineRepository(client: DbClient): PipelineRepository {
  return {
    async create({ companyId, name, isDefault, stages, at }) {
      // One statement: the pipeline and its stages are stored together even outside a transaction.
      const rows = await client.query(
        `WITH pipeline AS (
          INSERT INTO pipelines (company_id, name, is_default, created_at)
          VALUES ($1, $2, $3, $4::timestamptz)
          RETURNING id, name, is_default
        ), stages AS (
          INSERT INTO pipeline_stages (company_id, pipeline_id, name, position)
          SELECT $1, pipeline.id, stage.name, stage.ordinality - 1
          FROM pipeline, jsonb_array_elements_text($5::jsonb) WITH ORDINALITY AS stage (name, ordinality)
          ORDER BY stage.ordinality
          RETURNING id, name, position
        )
        SELECT pipeline.id AS pipeline_id, pipeline.name AS pipeline_name, pipeline.is_default,
          stages.id AS stage_id, stages.name AS stage_name, stages.position
        FROM pipeline LEFT JOIN stages ON true
        ORDER BY stages.position`,
        [companyId, name, isDefault, timeParameter(at), storableJson(stages)],
      )
      return pipelinesOf(rows)[0]!
    },

    async list({ companyId }) {
      const rows = await client.query(
        `SELECT pipeline.id AS pipeline_id, pipeline.name AS pipeline_name, pipeline.is_default,
          stage.id AS stage_id, stage.name AS stage_name, stage.position
        FROM pipelines pipeline LEFT JOIN pipeline_stages stage ON stage.pipeline_id = pipeline.id
        WHERE pipeline.company_id = $1
        ORDER BY pipeline.id, stage.position`,
        [companyId],
      )
      return pipelinesOf(rows)
    },
  }
}
