-- A won claim changes its run in the same commit, written by the store beside the claim
-- (Resolution::run_after): a follow-up run goes back to `running`, an agent's run ends
-- `finished`. The trigger that did the first half goes; the rule lives in one place.
DROP TRIGGER follow_up_resumes ON questions;
DROP FUNCTION follow_up_resumes();
-- Agents' runs a crash left `waiting` between the claim and the write that ended them (the
-- two commits of before) end here, with their last question's status as their result (the
-- claim writes its outcome line; the repair that did so at start-up is gone).
UPDATE runs SET status = 'finished', updated_at = COALESCE((
        SELECT MAX(q.resolved_at) FROM questions q WHERE q.run_id = runs.id), updated_at),
    result = COALESCE((
        SELECT q.status FROM questions q WHERE q.run_id = runs.id ORDER BY q.step DESC LIMIT 1), 'ended')
WHERE mode = 'external' AND status = 'waiting'
    AND NOT EXISTS (SELECT 1 FROM questions q WHERE q.run_id = runs.id AND q.status = 'pending');
-- Only the repair those runs needed read this index; nothing does now.
DROP INDEX runs_external_waiting;
