-- todoflow's PostgreSQL store, version 1 (docs/postgres.md, The schema).
-- A run is a row of todoflow_processes, its definition (run.json, plan/) and an
-- append-only journal whose rows hold exactly the JSON lines a run folder's
-- journal.jsonl holds; everything else a run shows is derived from the journal.

CREATE TABLE todoflow_processes (
    process_id text PRIMARY KEY,
    seq bigint NOT NULL DEFAULT 0,            -- the journal's last entry: the attempt-id guard
    meta json NOT NULL,                       -- run.json, as written
    created timestamptz NOT NULL DEFAULT clock_timestamp()
);
CREATE INDEX todoflow_processes_created ON todoflow_processes (created DESC, process_id DESC);

CREATE TABLE todoflow_plan_files (            -- the run folder's plan/: plan.json, step_config.json, prompts/
    process_id text NOT NULL REFERENCES todoflow_processes ON DELETE CASCADE,
    path text NOT NULL,
    content text NOT NULL,
    PRIMARY KEY (process_id, path)
);

CREATE TABLE todoflow_journal (
    process_id text NOT NULL REFERENCES todoflow_processes ON DELETE CASCADE,
    seq bigint NOT NULL CHECK (seq > 0),
    attempt text,                             -- the attempt id the step's reply carried
    request text,                             -- the digest of that reply: a retry of it is Replayed
    entry json NOT NULL,                      -- the journal line, as written
    PRIMARY KEY (process_id, seq),
    UNIQUE (process_id, attempt)
);

CREATE TABLE todoflow_snapshots (             -- the state every 1,000 entries (loading replays the rest)
    process_id text NOT NULL REFERENCES todoflow_processes ON DELETE CASCADE,
    seq bigint NOT NULL,
    state json NOT NULL,
    PRIMARY KEY (process_id, seq)
);

CREATE TABLE todoflow_learnings (             -- learnings.jsonl of every sub-step, one row per line
    line bigserial PRIMARY KEY,
    id text NOT NULL,
    sub_step_id text NOT NULL,
    process_id text NOT NULL,
    status text NOT NULL,
    record json NOT NULL,
    UNIQUE (id, status)
);
CREATE INDEX todoflow_learnings_sub_step ON todoflow_learnings (sub_step_id);

CREATE TABLE todoflow_starts (                -- MCP `start`: prepared, then executed once
    start_id text PRIMARY KEY,
    record json NOT NULL,
    created timestamptz NOT NULL DEFAULT clock_timestamp(),
    claimed boolean NOT NULL DEFAULT false,
    process_id text
);

CREATE TABLE todoflow_followers (             -- who follows a run (status --follow): its steps NOTIFY
    process_id text NOT NULL,
    follower integer NOT NULL,                -- the follower's backend pid
    PRIMARY KEY (process_id, follower)
);

CREATE TABLE todoflow_drivers (               -- who drives a run now: an instance holding its advisory lock
    process_id text NOT NULL,
    instance bigint NOT NULL,
    PRIMARY KEY (process_id, instance)
);
CREATE SEQUENCE todoflow_instances;
