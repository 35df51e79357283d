-- Whom a grant lets through: the function whose approvals it answers (`function:<name>`), the
-- agent that asked (`mcp:<client>`, `api:operator`, `agent:<name>`), or a gated MCP upstream
-- (`gate:<upstream>`). A grant answers only its grantee's later approvals, so an agent's own
-- request cannot mint a grant for a gated tool. Grants from before are given the grantee of
-- the run they were given in; one whose question is gone answers nothing ('').
ALTER TABLE grants ADD COLUMN grantee TEXT NOT NULL DEFAULT '';
UPDATE grants SET grantee = COALESCE((
    SELECT CASE WHEN r.mode = 'external' THEN r.initiator ELSE 'function:' || r.function END
    FROM questions q JOIN runs r ON r.id = q.run_id WHERE q.id = grants.question_id), '');
