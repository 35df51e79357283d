-- Reminders and escalation while a question waits: when (JSON, NULL for none), the next time
-- the sweeper looks at it, and where it was escalated to once it was.
ALTER TABLE questions ADD COLUMN nudges TEXT;
ALTER TABLE questions ADD COLUMN nudge_at INTEGER;
ALTER TABLE questions ADD COLUMN escalated_to TEXT;
CREATE INDEX questions_nudge_at ON questions (nudge_at) WHERE status = 'pending' AND nudge_at IS NOT NULL;
CREATE INDEX questions_escalated_to ON questions (escalated_to) WHERE escalated_to IS NOT NULL;
