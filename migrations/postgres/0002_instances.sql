-- Several askgate instances share one PostgreSQL database. Each one is a row here while it
-- lives, its heartbeat renewed every few seconds by the database's own clock (so instances on
-- hosts whose clocks disagree still agree on who is alive). An instance whose heartbeat lapsed
-- is dead: its running runs are taken over by a survivor, its blocking questions cancelled.
CREATE TABLE instances (
    id           TEXT PRIMARY KEY,
    host         TEXT NOT NULL,
    pid          BIGINT NOT NULL,
    started_at   TIMESTAMPTZ NOT NULL DEFAULT now(),
    heartbeat_at TIMESTAMPTZ NOT NULL DEFAULT now()
);

-- The instance that runs a run (sets it running, or holds its blocking ask). Every connection of
-- an instance names it in the setting `askgate.instance`, so each write of a run records its
-- writer, including the claim's trigger below.
ALTER TABLE runs ADD COLUMN owner TEXT;
CREATE INDEX runs_owner ON runs (owner) WHERE status = 'running';

CREATE OR REPLACE FUNCTION follow_up_resumes() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE runs SET status = 'running', updated_at = NEW.resolved_at,
                    owner = current_setting('askgate.instance', true)
    WHERE id = NEW.run_id AND status = 'waiting';
    RETURN NULL;
END;
$$;
