import type { Principal } from '../accounts/principal.js'
import type { Page, PageRequest, Pipeline, Storage, UsageRecord } from '../ports/storage.js'

export interface CreateBillingOptions {
  storage: Storage
}

/** What a company reads about its credits, its usage and its pipelines; tenancy from the principal. */
export interface Billing {
  balance(principal: Principal): Promise<{ balanceUsd: number; currency: 'USD' }>
  /** Newest first. */
  usage(principal: Principal, page: PageRequest): Promise<Page<UsageRecord>>
  pipelines(principal: Principal): Promise<{ pipelines: Pipeline[] }>
}

export function createBilling(options: CreateBillingOptions): Billing {
  const { storage } = options
  return {
    async balance(principal) {
      const balanceUsd = await storage.billing.getBalance({ companyId: principal.companyId })
      return { balanceUsd, currency: 'USD' }
    },

    usage: (principal, page) =>
      storage.billing.listUsage({ companyId: principal.companyId, limit: page.limit, cursor: page.cursor }),

    async pipelines(principal) {
      return { pipelines: await storage.pipelines.list({ companyId: principal.companyId }) }
    },
  }
}
