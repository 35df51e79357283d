-- Pending questions in the order they were asked (rowid), for listing them page by page (the
-- API, the event stream's backlog) without sorting them all.
CREATE INDEX questions_pending ON questions (status) WHERE status = 'pending';
