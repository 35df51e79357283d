-- Who asks, as cards name it: the function, the agent, or the agent and the upstream of a
-- gated call. Questions asked before are filled in from their runs.
ALTER TABLE questions ADD COLUMN asked_by TEXT NOT NULL DEFAULT '';
UPDATE questions SET asked_by = (
    SELECT CASE
        WHEN runs.mode = 'external' AND runs.function LIKE 'gate:%'
            THEN runs.initiator || ' via ' || substr(runs.function, 6)
        WHEN runs.mode = 'external' THEN runs.initiator
        ELSE runs.function
    END
    FROM runs WHERE runs.id = questions.run_id
) WHERE EXISTS (SELECT 1 FROM runs WHERE runs.id = questions.run_id);
