export interface Migration {
  /** Applied in increasing order; a version once released never changes. */
  readonly version: number
  readonly name: string
  /** One SQL statement each, so both drivers run them through the same extended protocol. */
  readonly statements: readonly string[]
}

/**
 * The schema, as migrations only ever added to: new versions create or add, never drop or
 * rewrite, so an older process still running against a newer schema keeps working. The one
 * exception drops what no version still running reads or names (`UNREAD_DROPS` in the tests).
 *
 * Conventions: `company_id` on every tenant table (the key tenancy filters on), `timestamptz` for
 * times (written from the injected clock, never `now()`, except columns kept for operators),
 * `numeric(20, 9)` for money, `bigserial` columns named `insertion` to order rows written in the
 * same millisecond. Tenant tables carry no foreign key to `companies`: like the memory storage,
 * the repositories accept any company number, and the accounts service creates the company first.
 */
export const MIGRATIONS: readonly Migration[] = [
  {
    version: 1,
    name: 'initial schema',
    statements: [
      `CREATE TABLE companies (
        id serial PRIMARY KEY,
        public_id uuid NOT NULL UNIQUE,
        name text NOT NULL,
        created_at timestamptz NOT NULL
      )`,

      // email_key is the email lower-cased by JavaScript, not by SQL lower(): lower() follows the
      // database's locale, which differs between servers and PGlite, and the key must find
      // exactly what the memory storage finds.
      `CREATE TABLE users (
        id uuid PRIMARY KEY,
        company_id integer NOT NULL,
        email text NOT NULL,
        email_key text NOT NULL,
        password_hash text NOT NULL,
        created_at timestamptz NOT NULL
      )`,
      'CREATE UNIQUE INDEX users_email_key_unique ON users (email_key)',
      'CREATE INDEX users_company ON users (company_id)',

      `CREATE TABLE refresh_tokens (
        id uuid PRIMARY KEY,
        company_id integer NOT NULL,
        token_hash text NOT NULL UNIQUE,
        user_id uuid NOT NULL REFERENCES users (id),
        login_id text NOT NULL,
        expires_at timestamptz NOT NULL,
        used_at timestamptz,
        revoked_at timestamptz,
        created_at timestamptz NOT NULL
      )`,
      'CREATE INDEX refresh_tokens_login ON refresh_tokens (login_id)',
      'CREATE INDEX refresh_tokens_user ON refresh_tokens (user_id)',

      // Deleted tokens stay, so their hash can never be handed out again.
      `CREATE TABLE api_tokens (
        id uuid PRIMARY KEY,
        company_id integer NOT NULL,
        user_id uuid NOT NULL REFERENCES users (id),
        name text NOT NULL,
        token_hash text NOT NULL UNIQUE,
        created_at timestamptz NOT NULL,
        deleted_at timestamptz
      )`,
      'CREATE INDEX api_tokens_company_live ON api_tokens (company_id, created_at, id) WHERE deleted_at IS NULL',
      'CREATE INDEX api_tokens_user ON api_tokens (user_id)',

      `CREATE TABLE billing_balances (
        company_id integer PRIMARY KEY,
        balance_usd numeric(20, 9) NOT NULL,
        updated_at timestamptz NOT NULL
      )`,

      `CREATE TABLE usage_records (
        id uuid PRIMARY KEY,
        company_id integer NOT NULL,
        session_id text NOT NULL,
        model text NOT NULL,
        input_tokens integer NOT NULL,
        output_tokens integer NOT NULL,
        cost_usd numeric(20, 9) NOT NULL,
        at timestamptz NOT NULL,
        insertion bigserial NOT NULL
      )`,
      'CREATE INDEX usage_records_newest ON usage_records (company_id, at DESC, insertion DESC)',

      `CREATE TABLE pipelines (
        id bigserial PRIMARY KEY,
        company_id integer NOT NULL,
        name text NOT NULL,
        is_default boolean NOT NULL,
        created_at timestamptz NOT NULL
      )`,
      'CREATE INDEX pipelines_company ON pipelines (company_id, id)',
      `CREATE TABLE pipeline_stages (
        id bigserial PRIMARY KEY,
        company_id integer NOT NULL,
        pipeline_id bigint NOT NULL REFERENCES pipelines (id),
        name text NOT NULL,
        position integer NOT NULL,
        UNIQUE (pipeline_id, position)
      )`,

      `CREATE TABLE login_failures (
        id bigserial PRIMARY KEY,
        email_key text NOT NULL,
        at timestamptz NOT NULL
      )`,
      'CREATE INDEX login_failures_key_at ON login_failures (email_key, at)',

      // handoff and routing_config are jsonb: isReferenced searches them with @>.
      `CREATE TABLE agents (
        id serial PRIMARY KEY,
        company_id integer NOT NULL,
        name text NOT NULL,
        role text,
        kind text NOT NULL CHECK (kind IN ('ai', 'human')),
        system_prompt text NOT NULL,
        llm_model text NOT NULL,
        routing_model text,
        routing_config jsonb,
        max_depth integer NOT NULL,
        handoff jsonb NOT NULL,
        fallback_reply text,
        created_at timestamptz NOT NULL,
        updated_at timestamptz NOT NULL
      )`,
      'CREATE INDEX agents_company ON agents (company_id, id)',

      `CREATE TABLE integrations (
        id bigserial PRIMARY KEY,
        company_id integer NOT NULL,
        type text NOT NULL,
        name text NOT NULL,
        active boolean NOT NULL,
        entry_agent_id integer NOT NULL,
        config jsonb NOT NULL,
        webhook_secret text,
        created_at timestamptz NOT NULL,
        updated_at timestamptz NOT NULL
      )`,
      'CREATE INDEX integrations_company ON integrations (company_id, id)',
      'CREATE INDEX integrations_entry_agent ON integrations (company_id, entry_agent_id)',

      // metadata is json, not jsonb: json keeps keys in the order written, and the shared
      // context's facts reach the prompt in the order they were saved.
      `CREATE TABLE sessions (
        id uuid PRIMARY KEY,
        company_id integer NOT NULL,
        integration_id bigint NOT NULL,
        client_id text NOT NULL,
        customer jsonb NOT NULL,
        state text NOT NULL CHECK (state IN ('ongoing', 'paused', 'closed')),
        active_agent_id integer NOT NULL,
        entry_agent_id integer NOT NULL,
        metadata json NOT NULL,
        pause_state jsonb,
        created_at timestamptz NOT NULL,
        updated_at timestamptz NOT NULL,
        version integer NOT NULL,
        insertion bigserial NOT NULL
      )`,
      `CREATE UNIQUE INDEX sessions_one_open_per_customer
        ON sessions (integration_id, client_id) WHERE state <> 'closed'`,
      'CREATE INDEX sessions_company_newest ON sessions (company_id, created_at DESC, insertion DESC)',
      'CREATE INDEX sessions_integration_newest ON sessions (integration_id, created_at DESC, insertion DESC)',

      `CREATE TABLE messages (
        id uuid PRIMARY KEY,
        sequence bigserial NOT NULL UNIQUE,
        company_id integer NOT NULL,
        session_id uuid NOT NULL REFERENCES sessions (id),
        integration_id bigint NOT NULL,
        role text NOT NULL CHECK (role IN ('customer', 'agent', 'operator', 'system')),
        text text NOT NULL,
        agent_id integer,
        at timestamptz NOT NULL,
        external_id text,
        delivery text CHECK (delivery IN ('pending', 'sent', 'failed', 'blocked')),
        CONSTRAINT messages_external_id_unique UNIQUE (integration_id, external_id)
      )`,
      'CREATE INDEX messages_session_sequence ON messages (session_id, sequence)',

      // Finished jobs stay (state done or dead) with their last error, and keep their message
      // from ever getting a second job.
      `CREATE TABLE jobs (
        id bigserial PRIMARY KEY,
        company_id integer NOT NULL,
        session_id uuid NOT NULL REFERENCES sessions (id),
        message_id uuid NOT NULL UNIQUE REFERENCES messages (id),
        state text NOT NULL DEFAULT 'queued' CHECK (state IN ('queued', 'done', 'dead')),
        available_at timestamptz NOT NULL,
        attempts integer NOT NULL DEFAULT 0,
        lease_token text,
        leased_until timestamptz,
        last_error text,
        created_at timestamptz NOT NULL DEFAULT now(),
        finished_at timestamptz
      )`,
      `CREATE INDEX jobs_queued ON jobs (id) WHERE state = 'queued'`,
      `CREATE INDEX jobs_queued_by_session ON jobs (session_id, id) WHERE state = 'queued'`,

      `CREATE TABLE outbox (
        message_id uuid PRIMARY KEY REFERENCES messages (id),
        company_id integer NOT NULL,
        session_id uuid NOT NULL,
        integration_id bigint NOT NULL,
        attempts integer NOT NULL DEFAULT 0,
        available_at timestamptz NOT NULL,
        lease_token text,
        leased_until timestamptz,
        insertion bigserial NOT NULL
      )`,
      'CREATE INDEX outbox_due ON outbox (available_at, insertion)',
      'CREATE INDEX outbox_session ON outbox (session_id)',

      `CREATE TABLE webhook_logs (
        id uuid PRIMARY KEY,
        company_id integer NOT NULL,
        integration_id bigint NOT NULL,
        received_at timestamptz NOT NULL,
        http_status integer NOT NULL,
        outcome text NOT NULL,
        reason text,
        session_id text,
        message_id text,
        insertion bigserial NOT NULL
      )`,
      'CREATE INDEX webhook_logs_newest ON webhook_logs (integration_id, received_at DESC, insertion DESC)',

      // words are the passage's content words as core's contentWords() finds them; the tsvector
      // is built from them as they are (no parser, no stemming), so a search matches exactly the
      // passages the memory index matches, whatever the alphabet.
      `CREATE TABLE knowledge_passages (
        id bigserial PRIMARY KEY,
        company_id integer NOT NULL,
        agent_id integer NOT NULL,
        document_id text NOT NULL,
        position integer NOT NULL,
        text text NOT NULL,
        words text[] NOT NULL,
        search tsvector GENERATED ALWAYS AS (array_to_tsvector(words)) STORED,
        UNIQUE (company_id, document_id, position)
      )`,
      'CREATE INDEX knowledge_passages_agent ON knowledge_passages (company_id, agent_id)',
      'CREATE INDEX knowledge_passages_search ON knowledge_passages USING gin (search)',

      // Event payloads too big for a NOTIFY (8000 bytes) wait here for their subscribers.
      `CREATE TABLE event_payloads (
        id bigserial PRIMARY KEY,
        topic text NOT NULL,
        payload text NOT NULL,
        created_at timestamptz NOT NULL DEFAULT now()
      )`,
      'CREATE INDEX event_payloads_created ON event_payloads (created_at)',
    ],
  },
  {
    version: 2,
    name: 'knowledge documents',
    statements: [
      `CREATE TABLE knowledge_documents (
        id uuid PRIMARY KEY,
        company_id integer NOT NULL,
        agent_id integer NOT NULL,
        title text NOT NULL,
        content text NOT NULL,
        created_at timestamptz NOT NULL,
        insertion bigserial NOT NULL
      )`,
      'CREATE INDEX knowledge_documents_agent ON knowledge_documents (company_id, agent_id, insertion)',
    ],
  },
  {
    version: 3,
    name: 'webhook deliveries',
    statements: [
      // No company_id: a delivery id is found by its integration alone, like a message's external id.
      `CREATE TABLE webhook_deliveries (
        integration_id bigint NOT NULL,
        delivery_id text NOT NULL,
        received_at timestamptz NOT NULL,
        insertion bigserial NOT NULL,
        PRIMARY KEY (integration_id, delivery_id)
      )`,
      'CREATE INDEX webhook_deliveries_received ON webhook_deliveries (integration_id, received_at)',
    ],
  },
  {
    version: 4,
    name: 'message channels',
    statements: [
      // The channel a customer message came from, and a reply goes back on (CONTRACT §6); stored
      // as storableKey stores it, like the session's customer. Null on rows written before.
      'ALTER TABLE messages ADD COLUMN channel_id text',
      'ALTER TABLE messages ADD COLUMN transport text',
    ],
  },
  {
    version: 5,
    name: 'outbox session order',
    statements: [
      // A session's head (its earliest row) in one probe: with outbox_session alone, finding it read
      // and sorted every row of the session, once for each due row a claim looked at.
      'CREATE INDEX outbox_session_insertion ON outbox (session_id, insertion)',
    ],
  },
  {
    version: 6,
    name: 'pending human transfers',
    statements: [
      // A transfer to a human from the pause's commit to its outcome's; claimed like the outbox,
      // and only once none of after_message_ids (its announcement) is in the outbox. Rows live
      // for the seconds a call takes, so a sweep reads a handful: no index but the key.
      `CREATE TABLE human_transfers (
        id uuid PRIMARY KEY,
        company_id integer NOT NULL,
        session_id uuid NOT NULL REFERENCES sessions (id),
        integration_id bigint NOT NULL,
        agent_id integer NOT NULL,
        operator_id bigint,
        group_id bigint,
        system_message boolean NOT NULL,
        pauses integer NOT NULL,
        after_message_ids uuid[] NOT NULL,
        lease_token text NOT NULL,
        leased_until timestamptz NOT NULL,
        insertion bigserial NOT NULL
      )`,
    ],
  },
  {
    version: 7,
    name: 'knowledge postings',
    statements: [
      // Each content word of each passage (as knowledge_passages.words holds it) with how often the
      // passage holds it and the passage's length: a search reads the rows of the message's words
      // only, not every passage of the agent. Words compare as bytes ("C"), as the index compares them.
      `CREATE TABLE knowledge_postings (
        company_id integer NOT NULL,
        agent_id integer NOT NULL,
        word text COLLATE "C" NOT NULL,
        passage_id bigint NOT NULL,
        occurrences integer NOT NULL,
        passage_words integer NOT NULL,
        PRIMARY KEY (company_id, agent_id, word, passage_id) INCLUDE (occurrences, passage_words)
      )`,
      // A removed passage's postings, found without reading the rest of the table (joined on the
      // primary key, a removal read every company's postings). Passage ids grow, so entries are
      // appended at the index's end.
      'CREATE INDEX knowledge_postings_passage ON knowledge_postings (passage_id)',
      // Each agent's passage count and content-word total, which BM25 needs at every search.
      `CREATE TABLE knowledge_agent_totals (
        company_id integer NOT NULL,
        agent_id integer NOT NULL,
        passages bigint NOT NULL,
        words bigint NOT NULL,
        PRIMARY KEY (company_id, agent_id)
      )`,
      // Postings and totals follow knowledge_passages in the statement that changes it, whoever
      // writes it: a process still running the code before this migration adds and removes
      // passages without knowing of them. Totals change by addition in one statement, so adds of
      // one agent's documents at once each wait for the row and none is lost. Statement triggers
      // with transition tables cost a few statements per document, not per passage.
      `CREATE FUNCTION knowledge_passages_added() RETURNS trigger LANGUAGE plpgsql
      SET search_path FROM CURRENT AS $$
      BEGIN
        INSERT INTO knowledge_postings (company_id, agent_id, word, passage_id, occurrences, passage_words)
        SELECT added.company_id, added.agent_id, held.word, added.id, held.occurrences, cardinality(added.words)
        FROM added, LATERAL (SELECT word, count(*) AS occurrences FROM unnest(added.words) AS word
          GROUP BY word) AS held;
        INSERT INTO knowledge_agent_totals AS totals (company_id, agent_id, passages, words)
        SELECT company_id, agent_id, count(*), sum(cardinality(words)) FROM added
        GROUP BY company_id, agent_id ORDER BY company_id, agent_id
        ON CONFLICT (company_id, agent_id) DO UPDATE
        SET passages = totals.passages + excluded.passages, words = totals.words + excluded.words;
        RETURN NULL;
      END
      $$`,
      `CREATE FUNCTION knowledge_passages_removed() RETURNS trigger LANGUAGE plpgsql
      SET search_path FROM CURRENT AS $$
      BEGIN
        DELETE FROM knowledge_postings WHERE passage_id = ANY (ARRAY(SELECT id FROM removed));
        UPDATE knowledge_agent_totals totals
        SET passages = totals.passages - gone.passages, words = totals.words - gone.words
        FROM (SELECT company_id, agent_id, count(*) AS passages, sum(cardinality(words)) AS words
          FROM removed GROUP BY company_id, agent_id) gone
        WHERE totals.company_id = gone.company_id AND totals.agent_id = gone.agent_id;
        -- An agent whose knowledge is gone (deleted, most likely) leaves no row behind.
        DELETE FROM knowledge_agent_totals totals
        USING (SELECT DISTINCT company_id, agent_id FROM removed) gone
        WHERE totals.company_id = gone.company_id AND totals.agent_id = gone.agent_id
          AND totals.passages = 0;
        RETURN NULL;
      END
      $$`,
      // Created before the backfill: the trigger's lock waits for transactions adding or removing
      // passages, and holds off new ones until this migration commits, so the backfill below
      // reads every passage that the triggers do not see.
      `CREATE TRIGGER knowledge_passages_added AFTER INSERT ON knowledge_passages
      REFERENCING NEW TABLE AS added FOR EACH STATEMENT EXECUTE FUNCTION knowledge_passages_added()`,
      `CREATE TRIGGER knowledge_passages_removed AFTER DELETE ON knowledge_passages
      REFERENCING OLD TABLE AS removed FOR EACH STATEMENT EXECUTE FUNCTION knowledge_passages_removed()`,
      `INSERT INTO knowledge_postings (company_id, agent_id, word, passage_id, occurrences, passage_words)
      SELECT passage.company_id, passage.agent_id, held.word, passage.id, held.occurrences, cardinality(passage.words)
      FROM knowledge_passages passage, LATERAL (SELECT word, count(*) AS occurrences
        FROM unnest(passage.words) AS word GROUP BY word) AS held`,
      `INSERT INTO knowledge_agent_totals (company_id, agent_id, passages, words)
      SELECT company_id, agent_id, count(*), sum(cardinality(words)) FROM knowledge_passages
      GROUP BY company_id, agent_id`,
    ],
  },
  {
    version: 8,
    name: 'knowledge search columns unread',
    statements: [
      // Read by no search since the one that joined passages' words (before any release), and by
      // nothing since postings: the tsvector and its GIN index were computed on every add, and
      // the (company_id, agent_id) index served only the per-search passage count. Dropping them
      // breaks no process still on the previous version, which neither names nor reads them.
      'DROP INDEX knowledge_passages_search',
      'ALTER TABLE knowledge_passages DROP COLUMN search',
      'DROP INDEX knowledge_passages_agent',
    ],
  },
  {
    version: 9,
    name: 'messages refused into closed sessions fail their statement',
    statements: [
      // Called by an insert `intoOpenSession` that found one of its sessions closed (or gone), so
      // that the refusal fails the statement, inside the transaction, rather than being found
      // afterwards from the rows it did not return: a COMMIT sent right behind the insert then
      // answers ROLLBACK. Each statement of a function gets a snapshot of its own, which sees the
      // close the insert waited for. `refuse_` returns boolean only to sit in the insert's WHERE.
      `CREATE FUNCTION switchboard_refuse_messages(messages jsonb) RETURNS boolean
      LANGUAGE plpgsql AS $$
      DECLARE
        refused uuid;
      BEGIN
        SELECT s.id INTO refused FROM sessions s
        WHERE s.id IN (SELECT (row->>'session_id')::uuid FROM jsonb_array_elements(messages) AS row)
          AND s.state = 'closed'
        LIMIT 1;
        IF refused IS NOT NULL THEN
          RAISE EXCEPTION 'session % is closed', refused USING ERRCODE = 'SBC01', DETAIL = refused::text;
        END IF;
        SELECT wanted.id INTO refused
        FROM (SELECT (row->>'session_id')::uuid AS id FROM jsonb_array_elements(messages) AS row) AS wanted
        WHERE NOT EXISTS (SELECT 1 FROM sessions s WHERE s.id = wanted.id)
        LIMIT 1;
        RAISE EXCEPTION 'session % does not exist', refused USING ERRCODE = 'SBC02';
      END
      $$`,
    ],
  },
]
